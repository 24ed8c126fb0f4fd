// Command template is a minimal OSM plugin to copy: rename the module path and the plugin, keep the layout.
//
// Build it exactly like the controller's default plugins:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags="-s -w" -o template.wasm .
package main

import "github.com/osmhq/osm/sdk/guest"

// A c-shared WebAssembly module runs package initialisers but never main, so the plugin registers in init.
func init() { guest.Register(Plugin{}) }

func main() {}
