package wasmcheck

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/internal/wasmtest"
	"github.com/tetratelabs/wazero"
)

func TestMeasureTmp(t *testing.T) {
	files, _ := filepath.Glob("/work/wt/sandbox/plugins/dist/*.wasm")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		start := time.Now()
		m, err := Check(b, Limits{Branches: 1 << 30, Cost: 1 << 62})
		if err != nil {
			t.Fatal(f, err)
		}
		t.Logf("%s: %v funcs=%d body=%d locals=%d branches=%d cost=%d", filepath.Base(f), time.Since(start), m.Functions, m.MaxBodyBytes, m.MaxLocals, m.MaxBranches, m.Cost)
	}
	for _, n := range []int{1000, 2000, 4000, 8000, 16000} {
		wasm := wasmtest.Module{Funcs: []wasmtest.Func{{Code: wasmtest.Nested(n), Export: "f"}}}.Bytes()
		rt := wazero.NewRuntime(context.Background())
		start := time.Now()
		_, err := rt.CompileModule(context.Background(), wasm)
		t.Logf("nested %d (%d bytes): %v %v", n, len(wasm), time.Since(start), err)
		rt.Close(context.Background())
	}
}
