package osc_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/render"
)

// TestImmutableUserDataReplacedOnlyWhenItsContentChanges: upstream OSM writes the user-data Secrets with
// `immutable: true`. One whose data must change is replaced (a new object, OSM's, mutable); one whose data is
// already what OSM renders keeps its object and gets OSM's metadata. No reconcile fails either way.
func TestImmutableUserDataReplacedOnlyWhenItsContentChanges(t *testing.T) {
	ctx, c, _, r, md := finalizerFixture(t, "osp-template")
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(md)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	rendered := map[string]*corev1.Secret{}
	for _, name := range []string{render.BootstrapSecretName(md), render.ProvisioningSecretName(md)} {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "cloud-init-settings", Name: name}, s); err != nil {
			t.Fatal(err)
		}
		rendered[name] = s
	}
	// What upstream would leave: the provisioning Secret with other content, the bootstrap Secret with OSM's
	// content (as if rendered identically), both immutable and without OSM's marks.
	immutable := true
	upstream := map[string]map[string][]byte{
		render.ProvisioningSecretName(md): {render.CloudConfigKey: []byte("#cloud-config\n# upstream\n")},
		render.BootstrapSecretName(md):    rendered[render.BootstrapSecretName(md)].Data,
	}
	before := map[string]*corev1.Secret{}
	for name, data := range upstream {
		if err := c.Delete(ctx, rendered[name]); err != nil {
			t.Fatal(err)
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cloud-init-settings", Name: name,
			Annotations: map[string]string{osc.AnnotationRevision: "1"}}, Immutable: &immutable, Data: data}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		before[name] = s
	}
	for i := 0; i < 2; i++ { // the second finds everything current
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("reconcile %d over upstream's immutable Secrets: %v", i, err)
		}
	}
	for name, old := range before {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(old), s); err != nil {
			t.Fatal(err)
		}
		if s.Annotations[osc.AnnotationRenderHash] == "" {
			t.Errorf("%s carries no render hash: %v", name, s.Annotations)
		}
		replaced := s.UID != old.UID
		if want := name == render.ProvisioningSecretName(md); replaced != want {
			t.Errorf("%s replaced: %v, want %v", name, replaced, want)
		}
		if replaced && (s.Immutable != nil && *s.Immutable || string(s.Data[render.CloudConfigKey]) == "#cloud-config\n# upstream\n") {
			t.Errorf("%s: the replacement is immutable or upstream's: %v %q", name, s.Immutable, s.Data[render.CloudConfigKey])
		}
	}
}
