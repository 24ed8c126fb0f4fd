package wasmtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
	"github.com/osmhq/osm/sdk/wasmtest"
)

// TestPluginsSpeakTheABI: a Spec's plugin loads in the real runtime (its osm_metadata declares Metadata), its
// osm_render outputs what Output asks for, and a hostile body is stopped with the reason it was built for.
func TestPluginsSpeakTheABI(t *testing.T) {
	rt, err := runtime.New(runtime.Config{CacheDir: t.TempDir(), Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		render []byte
		want   string
		reason runtime.Reason
	}{
		{"output", wasmtest.Output(5), wasmtest.Metadata[:5], ""},
		{"empty", nil, "", ""},
		{"spin", wasmtest.SpinRender, "", runtime.ReasonTimeout},
		{"recursion", wasmtest.SelfRecursiveRender, "", runtime.ReasonTrap},
	} {
		m, err := rt.Load(ctx, tc.name, wasmtest.Plugin(nil, tc.render, 1))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if md := m.Metadata(); md.Name != "hand" {
			t.Errorf("%s: metadata %+v", tc.name, md)
		}
		out, err := m.Call(ctx, abi.ExportRender, nil)
		if runtime.ReasonOf(err) != tc.reason || (tc.reason == "" && string(out) != tc.want) {
			t.Errorf("%s: osm_render = %q, %v; want %q, reason %q", tc.name, out, err, tc.want, tc.reason)
		}
	}
}
