package app_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/testenv"
)

// wasmModule assembles a module from vector sections, each an id and its entries.
func wasmModule(sections ...wasmSection) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		body := binary.AppendUvarint(nil, uint64(len(s.entries)))
		body = append(body, bytes.Join(s.entries, nil)...)
		out = append(binary.AppendUvarint(append(out, s.id), uint64(len(body))), body...)
	}
	return out
}

type wasmSection struct {
	id      byte
	entries [][]byte
}

// wasmBody is a function body without locals.
func wasmBody(code []byte) []byte {
	body := append(append([]byte{0}, code...), 0x0b)
	return append(binary.AppendUvarint(nil, uint64(len(body))), body...)
}

// hostileModules are modules each of which, before the plugin runtime checked for it, took the controller's
// process down or grew it by gigabytes when it loaded (sdk/runtime TestModulesRefusedBeforeCompiling replays
// each in the runtime alone). None is a plugin: each must be refused before it compiles or runs.
func hostileModules() map[string]struct {
	wasm []byte
	want string
} {
	oneFunc := []wasmSection{{1, [][]byte{{0x60, 0, 0}}}, {3, [][]byte{{0}}}} // type () -> (), one function of it
	grow := []byte{0xd0, 0x70, 0x41, 0xff, 0xff, 0xff, 0xff, 0x07, 0xfc, 0x0f, 0x00, 0x1a}
	return map[string]struct {
		wasm []byte
		want string
	}{
		// 15 bytes claiming 2^32 data segments: "fatal error: runtime: out of memory".
		"lying-count": {[]byte("\x00asm\x01\x00\x00\x00\x0b\x05\xff\xff\xff\xff\x0f"), "4294967295 entries declared in 0 bytes"},
		// Grows a table by 2^31 entries (16 GiB) on the Go heap: "fatal error: out of memory" under ulimit -v 8000000.
		"table-grow": {wasmModule(append(oneFunc, wasmSection{4, [][]byte{{0x70, 0x00, 0x00}}},
			wasmSection{10, [][]byte{wasmBody(grow)}})...), "table.grow on table 0, which declares no maximum"},
		// A million globals in 5 MB held 1.3 GiB once loaded.
		"globals": {wasmModule(wasmSection{6, slices.Repeat([][]byte{{0x7f, 0x00, 0x41, 0x00, 0x0b}}, 1_001)}),
			"globals 1001 exceeds the limit of 1000"},
	}
}

// TestHostileModulesFailOnlyTheirMachineDeployments runs the real controller, without admission in front of
// it (the drop-in start), with profiles whose plugins are hostile modules. Each of their MachineDeployments
// fails with PluginInvalid, a message naming the limit, and an event, and gets no user-data; the others render.
// Before the checks the lying count ended the process ("fatal error: runtime: out of memory"), and so did the
// table.grow under an 8 GB address-space limit.
func TestHostileModulesFailOnlyTheirMachineDeployments(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	modules := hostileModules()
	dir := builtins(t, nil)
	for name, m := range modules {
		if err := os.WriteFile(filepath.Join(dir, name+".wasm"), m.wasm, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	startOSM(t, env, nil, app.Options{Builtins: os.DirFS(dir), DisableDefaultOSPs: true, WorkerCount: 4})

	if err := c.Create(ctx, testOSP("osp-testos", "v1.0.0")); err != nil {
		t.Fatal(err)
	}
	for name := range modules {
		osp := testOSP("osp-"+name, "v1.0.0")
		osp.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: name}
		if err := c.Create(ctx, osp); err != nil {
			t.Fatalf("creating osp-%s: %v", name, err)
		}
		if err := c.Create(ctx, newMD(t, name, "testos", "aws", "osp-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, newMD(t, "healthy-a", "testos", "aws", "osp-testos")); err != nil {
		t.Fatal(err)
	}

	for name, m := range modules {
		waitForNotReady(t, c, name+".kube-system-config", osmv1alpha1.ReasonPluginInvalid, m.want)
		waitForEvent(t, c, name, osmv1alpha1.ReasonPluginInvalid)
		secret := name + "-kube-system-bootstrap-config"
		if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: secret}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a bootstrap Secret exists for a refused module (err=%v)", name, err)
		}
	}
	waitForSecret(t, c, "healthy-a-kube-system-bootstrap-config", "1")
	// And the controller still serves new work.
	if err := c.Create(ctx, newMD(t, "healthy-b", "testos", "openstack", "osp-testos")); err != nil {
		t.Fatal(err)
	}
	waitForSecret(t, c, "healthy-b-kube-system-bootstrap-config", "1")
}
