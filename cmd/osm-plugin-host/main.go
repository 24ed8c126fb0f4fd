// Command osm-plugin-host runs OS plugins for osm-controller, which starts it as a child process with its
// configuration in the environment (package pluginhost) and supervises it. It links the plugin runtime and
// nothing of the controller, so a host costs a Go runtime and the loaded modules, not the controller's
// libraries and their initialisation. osm-controller uses it when it lies next to its own executable, and
// serves as host itself otherwise. The same configuration can make it a compile process instead, which
// compiles one tenant's module into its cache without running any of its code.
//
// "osm-plugin-host precompile" also records the digests of what it compiled (osm-artifacts.json), which the
// controller's built-in host checks the seeded cache against.
//
// The build runs it once by hand: "osm-plugin-host precompile <dir> <module.wasm>..." compiles the default
// plugins into a cache directory that the controller seeds its hosts' cache from (make plugins, make image).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/osmhq/osm/host/pluginhost"
)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "precompile" {
		if err := pluginhost.Precompile(context.Background(), pluginhost.HostConfig{CacheDir: os.Args[2]}, os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "osm-plugin-host precompile:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Fprintln(os.Stderr, "osm-plugin-host runs plugins for osm-controller, which starts it; it is not run by hand (but for: osm-plugin-host precompile <dir> <module.wasm>...)")
	os.Exit(2)
}
