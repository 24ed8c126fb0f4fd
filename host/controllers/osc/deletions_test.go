package osc

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/osmhq/osm/host/scheme"
)

// TestADeletedWriteNeedsNoWait: an expectation that the cache shows a created object is met once the cache saw
// that object deleted after the write (also through a tombstone), and not by a deletion seen before the write
// or of another object.
func TestADeletedWriteNeedsNoWait(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build() // the cache shows nothing
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cloud-init-settings", Name: name}}
	}
	var d deletions
	d.record("Secret", secret("deleted"))
	d.record("Secret", toolscache.DeletedFinalStateUnknown{Key: "cloud-init-settings/tombstone", Obj: secret("tombstone")})
	// Writes answered a minute before the deletions, or a minute after them.
	before, after := time.Now().Add(-time.Minute), time.Now().Add(time.Minute)
	role := metaOf("Role", "cloud-init-settings", "deleted")
	for name, tc := range map[string]struct {
		e    expectation
		want bool
	}{
		"deleted after the write":          {expectation{cache: c, obj: secret("deleted"), at: before}, true},
		"deleted after, seen in tombstone": {expectation{cache: c, obj: secret("tombstone"), at: before}, true},
		"deleted before the write":         {expectation{cache: c, obj: secret("deleted"), at: after}, false},
		"never seen":                       {expectation{cache: c, obj: secret("absent"), at: before}, false},
		"another kind of the same name":    {expectation{cache: c, obj: role, at: before}, false},
	} {
		if got := tc.e.met(ctx, &d); got != tc.want {
			t.Errorf("%s: met = %v, want %v", name, got, tc.want)
		}
	}
}

// metaOf is a metadata-only object of the kind, as the cache holds it.
func metaOf(kind, ns, name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}
