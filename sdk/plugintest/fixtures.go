package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/runtime"
)

// The -update flag rewrites golden files. plugintest registers it unless a package initialised earlier did;
// a test package of the plugin that wants its own -update must reuse this one (flag.Lookup("update")).
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite plugintest golden files (testdata/*.response.json)")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// Renderer is one way of running a plugin's render: natively or as a module.
type Renderer interface {
	Render(req *abi.RenderRequest) (*abi.RenderResponse, error)
}

type nativeRenderer struct{ p guest.Plugin }

func (n nativeRenderer) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	return guest.Call(n.p, req)
}

func (n nativeRenderer) Metadata() abi.Metadata { return n.p.Metadata() }

// Native renders by calling p in-process through guest.Call (JSON round trip and host checks included).
func Native(p guest.Plugin) Renderer { return nativeRenderer{p} }

type wasmRenderer struct{ m *runtime.Module }

func (w wasmRenderer) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	return w.m.Render(context.Background(), req)
}

func (w wasmRenderer) Metadata() abi.Metadata { return w.m.Metadata() }

// Wasm renders through a loaded module (see Load).
func Wasm(m *runtime.Module) Renderer { return wasmRenderer{m} }

// RunFixtures runs every <dir>/<case>.request.json through r as a subtest and compares the result with
// <case>.response.json, or checks that the error contains <case>.error.txt. With -update it writes the
// response files instead. It fails the test when dir holds no fixture, so a mistyped path cannot pass.
func RunFixtures(t *testing.T, dir string, r Renderer) {
	t.Helper()
	requests, err := filepath.Glob(filepath.Join(dir, "*.request.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(requests) == 0 {
		t.Fatalf("no fixtures (*.request.json) in %s", dir)
	}
	sort.Strings(requests)
	for _, reqPath := range requests {
		name := strings.TrimSuffix(filepath.Base(reqPath), ".request.json")
		t.Run(name, func(t *testing.T) { runFixture(t, reqPath, r) })
	}
}

func runFixture(t *testing.T, reqPath string, r Renderer) {
	base := strings.TrimSuffix(reqPath, ".request.json")
	jsonPath, textPath, errPath := base+".response.json", base+".response.txt", base+".error.txt"

	var req abi.RenderRequest
	decodeFile(t, reqPath, &req)
	resp, renderErr := r.Render(&req)

	if wantErr, err := os.ReadFile(errPath); err == nil {
		want := strings.TrimSpace(string(wantErr))
		if renderErr == nil || !strings.Contains(renderErr.Error(), want) {
			t.Fatalf("render error = %v, want an error containing %q (from %s)", renderErr, want, errPath)
		}
		return
	}
	if renderErr != nil {
		t.Fatalf("render: %v", renderErr)
	}
	// A case with a JSON response keeps it; every other case gets the text format, which reviews better.
	if _, err := os.Stat(jsonPath); err != nil {
		Golden(t, textPath, Format(resp))
		return
	}
	if updating() {
		b, err := json.MarshalIndent(resp, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	var want abi.RenderResponse
	decodeFile(t, jsonPath, &want)
	if diff := cmp.Diff(&want, resp, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("response differs from %s (-want +got; rerun with -update to accept):\n%s", jsonPath, diff)
	}
}

func decodeFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create response files)", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a typo in a fixture must not silently drop a field
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
