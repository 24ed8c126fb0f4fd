// Command osm-plugin-host runs OS plugins for osm-controller, which starts it as a child process with its
// configuration in the environment (package pluginhost) and supervises it. It links the plugin runtime and
// nothing of the controller, so a host costs a Go runtime and the loaded modules, not the controller's
// libraries and their initialisation. osm-controller uses it when it lies next to its own executable, and
// serves as host itself otherwise.
package main

import (
	"fmt"
	"os"

	// Its init serves as a plugin host when the supervisor's environment says so, and never returns then.
	_ "github.com/osmhq/osm/host/pluginhost"
)

func main() {
	fmt.Fprintln(os.Stderr, "osm-plugin-host runs plugins for osm-controller, which starts it; it is not run by hand")
	os.Exit(2)
}
