// Command osm-controller runs OSM's reconcilers, admission webhooks and metrics endpoint.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "osm-controller: the controllers have not landed yet (issue 5).")
	os.Exit(1)
}
