// Command osm-plugin-verify verifies plugin image signatures for osm-controller, which starts it for each
// verification: it reads one request (the policy rule's trust material and the signatures the controller
// fetched from the registry) on its standard input, answers on its standard output and ends. It holds no
// credential, gives up the file system and the network first (Landlock), and is bounded by the controller
// in time, memory and output (package verifyproc). The signature libraries (sigstore-go, notation-go) live
// here so that the controller, which does not link them, does not carry their memory.
package main

import (
	"fmt"
	"os"

	"github.com/osmhq/osm/host/signature"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "osm-plugin-verify verifies plugin signatures for osm-controller, which starts it; it takes no arguments")
		os.Exit(2)
	}
	os.Exit(signature.ServeMain())
}
