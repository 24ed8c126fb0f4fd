package app

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
)

func TestCacheTransforms(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "osm", Operation: metav1.ManagedFieldsOperationUpdate}}
	userData := []byte(strings.Repeat("#cloud-config\n", 1000))
	secret := func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "md-kube-system-bootstrap-config", ManagedFields: managed,
			Annotations: map[string]string{"osm.k8c.io/render-hash": "h1"}},
			Data: map[string][]byte{render.CloudConfigKey: userData, "provisioning-token": []byte("tok"), "kubeconfig": []byte(strings.Repeat("k", 8000))}}
	}
	t.Run("user-data Secrets keep metadata and small values, user-data becomes its digest", func(t *testing.T) {
		transform := byObject[*corev1.Secret](t, sameClusterCacheOptions("kube-system", "cloud-init-settings")).Namespaces["cloud-init-settings"].Transform
		a, _ := transform(secret())
		b, _ := transform(secret())
		got := a.(*corev1.Secret)
		if got.ManagedFields != nil {
			t.Error("managedFields kept")
		}
		cc := string(got.Data[render.CloudConfigKey])
		if !strings.HasPrefix(cc, cachedDigestPrefix) || len(cc) != len(cachedDigestPrefix)+64 {
			t.Errorf("user-data not replaced by its digest: %q", cc[:min(len(cc), 80)])
		}
		if string(b.(*corev1.Secret).Data[render.CloudConfigKey]) != cc {
			t.Error("digest of the same user-data differs")
		}
		other := secret()
		other.Data[render.CloudConfigKey] = append([]byte("#changed\n"), userData...)
		c, _ := digestUserData(other)
		if string(c.(*corev1.Secret).Data[render.CloudConfigKey]) == cc {
			t.Error("changed user-data has the same digest: the Secret watch would miss the change")
		}
		// What the reconciler compares byte for byte stays as it is, whatever its size.
		if string(got.Data["provisioning-token"]) != "tok" || len(got.Data["kubeconfig"]) != 8000 {
			t.Errorf("small values changed: %v", got.Data)
		}
		if got.Annotations["osm.k8c.io/render-hash"] != "h1" || got.Name != "md-kube-system-bootstrap-config" {
			t.Error("metadata changed")
		}
	})
	t.Run("a Secret without user-data is left alone", func(t *testing.T) {
		s := &corev1.Secret{Data: map[string][]byte{"token": []byte("x")}}
		out, _ := digestUserData(s)
		if string(out.(*corev1.Secret).Data["token"]) != "x" {
			t.Error("changed")
		}
	})
	t.Run("OSCs are cached as metadata only", func(t *testing.T) {
		for name, opts := range map[string]cache.Options{"management": mgmtCacheOptions("kube-system"), "same cluster": sameClusterCacheOptions("kube-system", "cloud-init-settings")} {
			var kinds []string
			for obj := range opts.ByObject {
				if _, typed := obj.(*osmv1alpha1.OperatingSystemConfig); typed {
					t.Errorf("%s: whole OSCs cached", name)
				}
				if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
					kinds = append(kinds, m.Kind)
				}
			}
			if !slices.Contains(kinds, "OperatingSystemConfig") {
				t.Errorf("%s: no metadata-only cache of OSCs, only of %v", name, kinds)
			}
		}
	})
}

func TestCacheScope(t *testing.T) {
	opts := workerCacheOptions("cloud-init-settings")
	secrets := byObject[*corev1.Secret](t, opts)
	if len(secrets.Namespaces) != 2 || secrets.Namespaces["kube-system"].LabelSelector == nil {
		t.Errorf("Secrets cached beyond the user-data namespace and OSM's own bootstrap tokens: %+v", secrets.Namespaces)
	}
	if oscs := byObject[*metav1.PartialObjectMetadata](t, mgmtCacheOptions("osm")); len(oscs.Namespaces) != 1 {
		t.Errorf("OSCs cached beyond OSM's namespace: %+v", oscs.Namespaces)
	}
	if opts.DefaultTransform == nil {
		t.Error("no default transform: managedFields of every cached object are kept")
	}
}

// byObject finds the cache settings of the kind T.
func byObject[T client.Object](t *testing.T, opts cache.Options) cache.ByObject {
	t.Helper()
	for obj, by := range opts.ByObject {
		if _, ok := obj.(T); ok {
			return by
		}
	}
	var zero T
	t.Fatalf("no cache settings for %T", zero)
	return cache.ByObject{}
}
