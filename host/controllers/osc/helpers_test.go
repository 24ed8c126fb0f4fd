package osc

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
)

func TestRenderRelevant(t *testing.T) {
	base := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Generation: 1,
		Annotations: map[string]string{clusterv1alpha1.AnnotationRevision: "1"}}}
	for name, tc := range map[string]struct {
		mutate func(*clusterv1alpha1.MachineDeployment)
		want   bool
	}{
		"our finalizer": {func(m *clusterv1alpha1.MachineDeployment) { m.Finalizers = []string{Finalizer} }, false},
		"status":        {func(m *clusterv1alpha1.MachineDeployment) { m.Status.ReadyReplicas = 3 }, false},
		"spec":          {func(m *clusterv1alpha1.MachineDeployment) { m.Generation = 2 }, true},
		"revision":      {func(m *clusterv1alpha1.MachineDeployment) { m.Annotations[clusterv1alpha1.AnnotationRevision] = "2" }, true},
		"kubelet annotation": {func(m *clusterv1alpha1.MachineDeployment) {
			m.Annotations[clusterv1alpha1.AnnotationKubeletConfigPrefix+"MaxPods"] = "10"
		}, true},
		"deletion": {func(m *clusterv1alpha1.MachineDeployment) { m.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, true},
	} {
		t.Run(name, func(t *testing.T) {
			changed := base.DeepCopy()
			tc.mutate(changed)
			if got := renderRelevant(base, changed); got != tc.want {
				t.Errorf("renderRelevant = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestInputHashCoversEveryInput(t *testing.T) {
	md := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": "1"}}}
	md.Spec.Template.Spec.Versions.Kubelet = "1.33.0"
	osp := &osmv1alpha1.OperatingSystemProfile{ObjectMeta: metav1.ObjectMeta{UID: "u", Generation: 1}}
	osp.Spec.Version = "v1.0.0"
	cluster := render.ClusterInfo{ServerURL: "https://a", CACert: "ca"}
	base := inputHash(md, osp, "sha256:1", cluster, "s", "b")
	if again := inputHash(md.DeepCopy(), osp.DeepCopy(), "sha256:1", cluster, "s", "b"); again != base {
		t.Fatal("hash is not deterministic")
	}
	variants := map[string]string{}
	m2 := md.DeepCopy()
	m2.Spec.Template.Spec.Versions.Kubelet = "1.34.0"
	variants["kubelet"] = inputHash(m2, osp, "sha256:1", cluster, "s", "b")
	m3 := md.DeepCopy()
	m3.Annotations["a"] = "2"
	variants["annotation"] = inputHash(m3, osp, "sha256:1", cluster, "s", "b")
	o2 := osp.DeepCopy()
	o2.Generation = 2
	variants["profile generation"] = inputHash(md, o2, "sha256:1", cluster, "s", "b")
	variants["plugin digest"] = inputHash(md, osp, "sha256:2", cluster, "s", "b")
	variants["cluster CA"] = inputHash(md, osp, "sha256:1", render.ClusterInfo{ServerURL: "https://a", CACert: "other"}, "s", "b")
	variants["settings"] = inputHash(md, osp, "sha256:1", cluster, "t", "b")
	variants["build"] = inputHash(md, osp, "sha256:1", cluster, "s", "c")
	o3 := osp.DeepCopy()
	o3.Status.Conditions = []metav1.Condition{{Type: "Ready"}}
	if inputHash(md, o3, "sha256:1", cluster, "s", "b") != base {
		t.Error("a profile status change must not re-render")
	}
	for name, h := range variants {
		if h == base {
			t.Errorf("changing the %s does not change the hash", name)
		}
	}
}

func TestRefreshAfter(t *testing.T) {
	now := time.Now()
	st := &state{bootstrapToken: credentials.Token{Value: "b", Expires: now.Add(20 * time.Hour)}, tokenTTL: 24 * time.Hour}
	// Refresh when 8h (a third of 24h) are left: in 12h.
	if got := st.refreshAfter(now); got < 12*time.Hour || got > 12*time.Hour+2*time.Second {
		t.Errorf("refreshAfter = %s, want about 12h", got)
	}
	// Past due: at once, but not in a busy loop.
	st.bootstrapToken.Expires = now.Add(time.Hour)
	if got := st.refreshAfter(now); got != time.Second {
		t.Errorf("refreshAfter of a token due for extension = %s, want 1s", got)
	}
}
