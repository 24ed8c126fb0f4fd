package pluginhost_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/osmhq/osm/host/internal/hostbuild"
	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
	"github.com/osmhq/osm/sdk/wasmtest"
)

// TestTheDedicatedHostServes builds cmd/osm-plugin-host and has a supervisor load and call a plugin in it, as
// osm-controller does when the dedicated host lies next to it.
func TestTheDedicatedHostServes(t *testing.T) {
	bin, err := hostbuild.Build(t.TempDir(), "") // as the image ships it
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(bin).Run(); err == nil {
		t.Error("run by hand, it exited 0; want a refusal")
	}
	s, err := pluginhost.New(pluginhost.Config{Executable: bin, Host: pluginhost.HostConfig{Timeout: time.Minute, CacheDir: t.TempDir()}, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	wasm := wasmtest.Plugin(nil, nil, 1)
	m := pluginhost.Module{Name: "hand", Digest: runtime.Digest(wasm), Bytes: func() ([]byte, func(), error) { return wasm, func() {}, nil }}
	res, err := s.Load(context.Background(), m)
	if err != nil || res.Metadata.Name != "hand" {
		t.Fatalf("load: %+v, %v", res, err)
	}
	if _, err := s.Call(context.Background(), m, abi.ExportRender, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
}
