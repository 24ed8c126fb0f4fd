package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// TestFastPathMatchesStandardPath calls the same plugins with the same inputs on the fast path and on the
// standard Extism path: metadata, raw outputs (byte for byte), typed results, guest output and errors must
// be the same.
func TestFastPathMatchesStandardPath(t *testing.T) {
	type outcome struct {
		Out    string
		Reason runtime.Reason
		Err    string
		Stderr []string
	}
	render := func(mutate func(*abi.RenderRequest)) []byte {
		req := benchRequest()
		req.ABIVersion = abi.Version
		if mutate != nil {
			mutate(req)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	calls := []struct {
		name, plugin, export string
		in                   []byte
	}{
		{"render", "healthy", abi.ExportRender, render(nil)},
		{"small render", "healthy", abi.ExportRender, []byte(`{"abiVersion":"v1","input":{"files":[{"path":"/a","content":{"inline":{"data":"\u003c\u2028\ufffd"}}}]}}`)},
		{"plugin error", "healthy", abi.ExportRender, render(func(r *abi.RenderRequest) { r.Config = map[string]string{"fail": "mirror must be a URL"} })},
		{"recovered panic", "healthy", abi.ExportRender, render(func(r *abi.RenderRequest) { r.Config = map[string]string{"panic": "nil map"} })},
		{"request of another ABI", "healthy", abi.ExportRender, []byte(`{"abiVersion":"v2"}`)},
		{"request not JSON", "healthy", abi.ExportRender, []byte(`{"abiVersion":`)},
		{"empty request", "healthy", abi.ExportRender, nil},
		{"validate", "healthy", abi.ExportValidate, []byte(`{"abiVersion":"v1","osVersion":"2.0"}`)},
		{"encode not implemented", "healthy", abi.ExportEncode, []byte(`{"abiVersion":"v1"}`)},
		{"metadata", "healthy", abi.ExportMetadata, nil},
		{"unrecoverable panic", "panic", abi.ExportRender, render(nil)},
		{"sandbox", "sandbox", abi.ExportRender, render(nil)},
	}
	results := map[string][]outcome{}
	var metadata []abi.Metadata
	for _, p := range paths {
		var stderr []string
		cfg := p.cfg
		cfg.Hooks.Output = func(e runtime.OutputEvent) { stderr = append(stderr, e.Stream+": "+withoutStacks(e.Text)) }
		rt := newRuntime(t, cfg)
		for _, c := range calls {
			m := load(t, rt, c.plugin)
			if got := runtime.PathOf(m); got != p.want {
				t.Fatalf("%s: %s runs on the %s path, want %s", p.name, c.plugin, got, p.want)
			}
			stderr = nil
			out, err := m.Call(context.Background(), c.export, c.in)
			o := outcome{Out: string(out), Reason: runtime.ReasonOf(err), Stderr: stderr}
			if err != nil {
				o.Err = err.Error()
			}
			results[c.name] = append(results[c.name], o)
		}
		metadata = append(metadata, load(t, rt, "healthy").Metadata())
	}
	for _, c := range calls {
		r := results[c.name]
		if diff := cmp.Diff(r[1], r[0]); diff != "" {
			t.Errorf("%s: the fast path (+) differs from the standard path (-):\n%s", c.name, diff)
		}
	}
	if diff := cmp.Diff(metadata[1], metadata[0]); diff != "" {
		t.Errorf("metadata: the fast path (+) differs from the standard path (-):\n%s", diff)
	}
	if r := results["render"][0]; r.Err != "" || len(r.Out) < 6000 {
		t.Errorf("render: %+v, want a successful render", r)
	}
	for name, want := range map[string]runtime.Reason{"plugin error": runtime.ReasonPluginError, "recovered panic": runtime.ReasonPluginError,
		"unrecoverable panic": runtime.ReasonPanic, "request of another ABI": runtime.ReasonPluginError} {
		if got := results[name][0].Reason; got != want {
			t.Errorf("%s: reason %q, want %q", name, got, want)
		}
	}

	// The typed calls decode outputs with the SDK's codec; the results must be what encoding/json gives.
	for _, p := range paths {
		m := load(t, newRuntime(t, p.cfg), "healthy")
		req := benchRequest()
		resp, err := m.Render(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		req.ABIVersion = abi.Version
		raw, _ := json.Marshal(req)
		out, err := m.Call(context.Background(), abi.ExportRender, raw)
		if err != nil {
			t.Fatal(err)
		}
		var want abi.RenderResponse
		if err := json.Unmarshal(out, &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&want, resp); diff != "" {
			t.Errorf("%s: Render (+) differs from encoding/json's decoding of the output (-):\n%s", p.name, diff)
		}
	}
}

// withoutStacks cuts Go stack traces from guest output: the exports they pass through differ between the paths.
func withoutStacks(s string) string {
	if i := strings.Index(s, "\ngoroutine "); i >= 0 {
		return s[:i] + "\n<stack>"
	}
	return s
}

func TestFastPathOnlyForModulesThatExportIt(t *testing.T) {
	rt := newRuntime(t, runtime.Config{})
	for plugin, want := range map[string]string{"healthy": "fast+metered", "badfast": "fast+metered", "badjson": "standard"} {
		if got := runtime.PathOf(load(t, rt, plugin)); got != want {
			t.Errorf("%s runs on the %s path, want %s", plugin, got, want)
		}
	}
	m := load(t, rt, "healthy")
	_, err := m.Call(context.Background(), "_initialize", nil)
	checkError(t, "raw call of a non-ABI export", err, runtime.ReasonMissingExport, "is not an ABI export")
}

// TestFastPathGarbageIsContained: a module that breaks the fast path's calling convention fails the call with
// a clean error, its instance is discarded, and the module keeps serving.
func TestFastPathGarbageIsContained(t *testing.T) {
	rt := newRuntime(t, runtime.Config{Timeout: time.Second, MaxIdleInstances: 1})
	m := load(t, rt, "badfast")
	if md := m.Metadata(); md.Name != "badfast" {
		t.Fatalf("metadata %+v", md)
	}
	run := func(mode string) error {
		req := renderRequest()
		req.Config = map[string]string{"mode": mode}
		resp, err := m.Render(context.Background(), req)
		if err == nil && (len(resp.Config.Files) != 1 || resp.Config.Files[0].Content.Inline.Data != mode) {
			return fmt.Errorf("unexpected response %+v", resp)
		}
		return err
	}
	tests := []struct {
		mode       string
		wantReason runtime.Reason
		wantMsg    string
	}{
		{"error", runtime.ReasonPluginError, "osm_render: mirror must be a URL"},
		{"out-of-bounds", runtime.ReasonInvalidOutput, "broke the fast-path calling convention: osm_v1_call returned 16 bytes at 0x7fff0000, outside linear memory"},
		{"length-out-of-bounds", runtime.ReasonInvalidOutput, "broke the fast-path calling convention"},
		{"panic", runtime.ReasonPanic, "panic: fast path exploded"},
		{"loop", runtime.ReasonTimeout, "timed out after 1s"},
		{"extism", runtime.ReasonTrap, "extism:host/env.output_set called on the fast path"},
		{"exit", runtime.ReasonInvalidOutput, "output is not a valid osm_render response"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			checkError(t, tt.mode, run(tt.mode), tt.wantReason, `plugin "badfast"`, tt.wantMsg)
			if err := run("ok"); err != nil {
				t.Errorf("render after %s: %v", tt.mode, err)
			}
		})
	}
	t.Run("alloc out of bounds", func(t *testing.T) {
		if err := run("arm-alloc-out-of-bounds"); err != nil {
			t.Fatal(err)
		}
		// The armed instance went back to the pool: the next call's osm_v1_alloc misbehaves.
		checkError(t, "alloc", run("ok"), runtime.ReasonInvalidOutput, "osm_v1_alloc returned address 0xffffffc0")
		if err := run("ok"); err != nil {
			t.Errorf("render after a bad osm_v1_alloc: %v", err)
		}
	})
}

// TestFastPathInterruptsLoopsPromptly: on the metered fast path a tight loop is stopped at its deadline, as
// wazero's close-on-context-done mode stops it on the standard path.
func TestFastPathInterruptsLoopsPromptly(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			cfg := p.cfg
			cfg.Timeout = 200 * time.Millisecond
			m := load(t, newRuntime(t, cfg), "loop")
			start := time.Now()
			_, err := m.Render(context.Background(), renderRequest())
			took := time.Since(start)
			if !errors.Is(err, runtime.ErrTimeout) {
				t.Fatalf("err = %v, want a timeout", err)
			}
			if took > 200*time.Millisecond+time.Second {
				t.Errorf("the loop ran %v past its 200ms timeout", took-200*time.Millisecond)
			}
		})
	}
}
