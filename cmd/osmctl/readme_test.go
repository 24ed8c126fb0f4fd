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

	var lines []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "osmctl ") {
			lines = append(lines, line)
		}
	}
	if len(lines) < 3 {
		t.Fatalf("the section shows %d osmctl commands, want the mirror, save, load flow", len(lines))
	}
	for _, line := range lines {
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
		if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
			t.Errorf("%q: %v", line, err)
		}
		if err := cmd.ValidateRequiredFlags(); err != nil {
			t.Errorf("%q: %v", line, err)
		}
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
