// Command osmctl is OSM's CLI for operators and plugin authors: offline rendering, profile linting and plugin
// OCI tooling.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "osmctl: the render pipeline has not landed yet (issue 4); nothing to render.")
	fmt.Fprintln(os.Stderr, "osmctl: the API types and CRDs are in crds/; `make test` exercises them against a real kube-apiserver.")
}
