// Command debian is OSM's default plugin for debian, built to WebAssembly by hack/build-plugins.sh. The logic is in
// plugin.go; everything else is the public SDK (sdk/node), as for any vendor plugin.
package main

import (
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/node"
)

// A c-shared WebAssembly module runs package initialisers but never main, so the plugin registers in init.
func init() { guest.Register(node.New(OS())) }

func main() {}
