package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/osmhq/osm/host/render"
)

var update = flag.Bool("update", false, "rewrite cmd/osmctl/controller-flags.txt")

// TestControllerFlagList keeps the list osmctl reads equal to the controller's flags.
func TestControllerFlagList(t *testing.T) {
	path := filepath.Join("..", "osmctl", "controller-flags.txt")
	want := flagList()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not the controller's flag list; run go test ./cmd/osm-controller -run TestControllerFlagList -update", path)
	}
}

// Roles of a flag in the list osmctl reads (cmd/osmctl/controller-flags.txt).
const (
	// roleNode: a node setting (render.NodeFlags). An installation over upstream keeps upstream's value, or
	// upstream's default by not setting it; it never takes deploy/'s.
	roleNode = "node"
	// roleIgnored: accepted for compatibility and without effect (the controller logs so at start).
	roleIgnored = "ignored"
	// roleController: how the controller itself runs.
	roleController = "controller"
)

// flagList describes every flag of the controller, one line each: name, "bool" or "value", role. osmctl
// upstream-overlay reads it to tell which of an upstream Deployment's arguments the controller takes, and which
// of deploy/'s it may add; TestControllerFlagList keeps cmd/osmctl/controller-flags.txt equal to it.
func flagList() string {
	fs := flag.NewFlagSet("osm-controller", flag.ContinueOnError)
	(&flags{}).register(fs)
	fs.Bool("version", false, "")
	node := flag.NewFlagSet("node", flag.ContinueOnError)
	(&render.NodeFlags{}).AddFlags(node)
	var lines []string
	fs.VisitAll(func(f *flag.Flag) {
		kind := "value"
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			kind = "bool"
		}
		role := roleController
		switch {
		case node.Lookup(f.Name) != nil:
			role = roleNode
		case strings.HasPrefix(f.Usage, "Accepted for compatibility"):
			role = roleIgnored
		}
		lines = append(lines, fmt.Sprintf("%s\t%s\t%s", f.Name, kind, role))
	})
	sort.Strings(lines)
	return "# The flags of osm-controller (name, bool or value, role: node, controller or ignored), for osmctl upstream-overlay.\n" +
		"# Written by `go test ./cmd/osm-controller -run TestControllerFlagList -update`.\n" + strings.Join(lines, "\n") + "\n"
}
