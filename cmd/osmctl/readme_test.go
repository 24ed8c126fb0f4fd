package main

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/osmhq/osm/host/render"
)

// TestAirGapGuide keeps the air-gap guide (docs/airgap.md) honest: every osmctl command line in it parses
// (command, flags, arguments), and every controller flag it names exists. The commands themselves are
// exercised by TestAirGap and TestMirror.
func TestAirGapGuide(t *testing.T) {
	data, err := os.ReadFile("../../docs/airgap.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(data)

	if n := checkGuideCommands(t, section, true); n < 3 {
		t.Fatalf("the section shows %d osmctl commands, want the mirror, save, load flow", n)
	}

	controller, err := os.ReadFile("../osm-controller/main.go")
	if err != nil {
		t.Fatal(err)
	}
	node := flag.NewFlagSet("node", flag.ContinueOnError)
	(&render.NodeFlags{}).AddFlags(node)
	for _, m := range regexp.MustCompile("`-([a-z][a-z0-9-]*[a-z0-9])[`=]").FindAllStringSubmatch(section, -1) {
		name := m[1]
		if node.Lookup(name) == nil && !strings.Contains(string(controller), `"`+name+`"`) {
			t.Errorf("the section names -%s, which osm-controller does not have", name)
		}
	}
}

// checkGuideCommands checks that every line of a guide that starts with "osmctl " names a command whose flags
// parse (a trailing "# comment" or "> redirect" is cut off first); strict also checks its arguments and required
// flags. It returns how many command lines the guide holds.
func checkGuideCommands(t *testing.T, guide string, strict bool) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(guide, "\n") {
		if !strings.HasPrefix(line, "osmctl ") {
			continue
		}
		n++
		line, _, _ = strings.Cut(line, "#")
		line, _, _ = strings.Cut(line, ">")
		args, err := shellWords(strings.TrimPrefix(line, "osmctl "))
		if err != nil {
			t.Fatal(err)
		}
		root := newRootCommand(&globals{})
		cmd, rest, err := root.Find(args)
		if err != nil || cmd == root {
			t.Errorf("%q: no such command (%v)", line, err)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("%q: %v", line, err)
			continue
		}
		if !strict {
			continue
		}
		if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
			t.Errorf("%q: %v", line, err)
		}
		if err := cmd.ValidateRequiredFlags(); err != nil {
			t.Errorf("%q: %v", line, err)
		}
	}
	return n
}
