package render_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

// bigExtensions are n extensions that each write four files of about 1 MB into the provisioning stage: each is
// within the templates' per-file (OutputBytes) and per-stage (StageOutputBytes) limits on its own.
func bigExtensions(n int) []*osmv1alpha1.OperatingSystemProfileExtension {
	var xs []*osmv1alpha1.OperatingSystemProfileExtension
	for i := range n {
		part := &osmv1alpha1.ExtensionConfig{}
		for j := range 4 {
			part.Files = append(part.Files, osmv1alpha1.File{Path: fmt.Sprintf("/opt/x%02d/f%d", i, j),
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: `{{ "x" | repeat 1000000 }}`}}})
		}
		xs = append(xs, &osmv1alpha1.OperatingSystemProfileExtension{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("x%02d", i), Namespace: "kube-system"},
			Spec: osmv1alpha1.OperatingSystemProfileExtensionSpec{ProvisioningConfig: part}})
	}
	return xs
}

// peakHeap samples the heap while f runs and returns the largest heap seen, in MiB.
func peakHeap(f func()) (peak uint64) {
	runtime.GC()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for !stop.Load() {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			time.Sleep(2 * time.Millisecond) // the sampling interval
		}
	}()
	f()
	stop.Store(true)
	<-done
	return peak >> 20
}

// TestExtensionsShareTheStageBudget is the attack of 25 extensions that each stay within the template limits of
// a stage: together they would build 100 MB of provisioning configuration. The profile's templates and every
// extension's share one budget per stage, so the render stops at the stage's output limit, naming the
// extension that reached it, before the configuration is ever encoded.
func TestExtensionsShareTheStageBudget(t *testing.T) {
	osp := &osmv1alpha1.OperatingSystemProfile{}
	loadYAML(t, filepath.Join(upstreamDir, "osp-ubuntu.yaml"), osp)
	in := render.Input{
		MachineDeployment: upstreamMD(t, "big", osp.Name, "1.33.2", "ubuntu", "aws", `{}`),
		Profile:           osp,
		Cluster:           render.ClusterInfo{ServerURL: "https://api.example:6443", CACert: "ca"},
		Settings:          upstreamSettings(true),
		Extensions:        bigExtensions(25),
	}
	var err error
	peak := peakHeap(func() {
		var out *render.Output
		if out, err = (&render.Renderer{}).Render(context.Background(), in); err == nil {
			_, err = out.UserData(context.Background(), abi.StageProvisioning, render.SecretValues{})
		}
	})
	t.Logf("25 extensions of 4 MB each: peak heap %d MiB, error: %.300v", peak, err)
	if render.Reason(err) != osmv1alpha1.ReasonTemplateError || !strings.Contains(err.Error(), "StageOutputBytes") {
		t.Fatalf("want a TemplateError over the stage's output limit, got %v (reason %s)", err, render.Reason(err))
	}
}
