// Command opensuse is an OSM plugin for openSUSE Leap 15.6 and SUSE Linux Enterprise Server 15 SP6, built only
// on the public SDK (github.com/osmhq/osm/sdk) as a module of its own, the way an OS vendor would ship one.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags="-s -w" -o opensuse.wasm .
package main

import (
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/node"
)

// A c-shared WebAssembly module runs package initialisers but never main, so the plugin registers in init.
func init() { guest.Register(node.New(OS())) }

func main() {}
