// Command settings is an OSM format plugin for a Bottlerocket-style OS: no cloud-init, no Ignition, no shell;
// the user-data is a TOML settings document the OS applies at every boot, and the node joins from it
// (the join-from-settings boot contract, sdk/SPEC.md §9).
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags="-s -w" -o settings.wasm .
package main

import "github.com/osmhq/osm/sdk/guest"

// A c-shared WebAssembly module runs package initialisers but never main, so the plugin registers in init.
func init() { guest.Register(Plugin{}) }

func main() {}
