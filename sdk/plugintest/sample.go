package plugintest

// This file builds sample render requests: a realistic context as the controller sends it, with the host's
// placeholders, that each test adjusts.

import (
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/internal/sample"
)

// CACert is a self-signed RSA 2048 certificate (private key discarded), the size of a real cluster CA, so
// that the measured user-data sizes are realistic.
const CACert = sample.CACert

// Placeholders are the host's secret placeholders.
var Placeholders = sample.Placeholders

// ContainerdConfig stands for the host's containerd config.toml.
const ContainerdConfig = sample.ContainerdConfig

// Request returns a render request for os on provider.
func Request(osName, osVersion, utility, provider string, stage abi.Stage) *abi.RenderRequest {
	return sample.Request(osName, osVersion, utility, provider, stage)
}

// Render calls p the way the host does (through JSON, with the host's checks) and returns the configuration.
func Render(t testing.TB, p guest.Plugin, req *abi.RenderRequest) *abi.NodeConfig {
	t.Helper()
	resp, err := guest.Call(p, req)
	if err != nil {
		t.Fatal(err)
	}
	return &resp.Config
}

// File returns the content of the file at path, failing the test if there is none.
func File(t testing.TB, cfg *abi.NodeConfig, path string) string {
	t.Helper()
	f := cfg.File(path)
	if f == nil {
		t.Fatalf("no file %s", path)
	}
	return f.Content.Inline.Data
}

// Contains fails the test for every want missing from text and every not present in it.
func Contains(t testing.TB, what, text string, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
	for _, n := range not {
		if strings.Contains(text, n) {
			t.Errorf("%s contains %q", what, n)
		}
	}
}

// Masked reports whether cfg masks the unit.
func Masked(cfg *abi.NodeConfig, name string) bool {
	u := cfg.Unit(name)
	return u != nil && u.Mask != nil && *u.Mask
}
