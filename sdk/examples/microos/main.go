// Command microos is an OSM plugin for openSUSE MicroOS and SLE Micro, nodes provisioned by Ignition whose
// root file system is a read-only snapshot, built only on the SDK's node kit and its Ignition family.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags="-s -w" -o microos.wasm .
package main

import (
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/node"
)

// A c-shared WebAssembly module runs package initialisers but never main, so the plugin registers in init.
func init() { guest.Register(node.New(OS())) }

func main() {}
