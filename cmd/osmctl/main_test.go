package main

import (
	"slices"
	"strings"
	"testing"
)

func TestControllerSpelling(t *testing.T) {
	root := newRootCommand(&globals{})
	tests := []struct{ in, want []string }{
		{in: []string{"render", "-f", "md.yaml", "-node-registry-mirrors=https://m", "-pause-image", "p:1"},
			want: []string{"render", "-f", "md.yaml", "--node-registry-mirrors=https://m", "--pause-image", "p:1"}},
		{in: []string{"plugin", "push", "-q", "-plain-http", "x.wasm", "r/x:1"},
			want: []string{"plugin", "push", "-q", "--plain-http", "x.wasm", "r/x:1"}},
		{in: []string{"plugin", "run", "x.wasm", "-i", "-", "-unknown", "--", "-stage"},
			want: []string{"plugin", "run", "x.wasm", "-i", "-", "-unknown", "--", "-stage"}},
	}
	for _, tt := range tests {
		if got := controllerSpelling(root, tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("controllerSpelling(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("pull x: fetch manifest:\n  GET /v2/x\r\n\nunauthorized"); got != "pull x: fetch manifest:; GET /v2/x; unauthorized" {
		t.Errorf("oneLine() = %q", got)
	}
}

func TestExitCodes(t *testing.T) {
	if r := osmctl(t, "--help"); r.code != 0 || !strings.Contains(r.stdout, "osmctl") {
		t.Errorf("help: %s", r)
	}
	if r := osmctl(t, "frobnicate"); r.code != 1 || !strings.Contains(r.stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %s", r)
	}
}
