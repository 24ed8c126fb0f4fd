package credentials_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/scheme"
)

func md(name, uid string) *clusterv1alpha1.MachineDeployment {
	return &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: apitypes.UID("uid-" + uid)}}
}

// TestBootstrapTokenLifecycle drives the bootstrap token through its life with a controllable clock: issued
// once, reused, extended in place (same value, so no user-data changes) when a third of its life is left.
func TestBootstrapTokenLifecycle(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	iss := &credentials.Issuer{Client: c, Namespace: "cloud-init-settings", BootstrapTokenTTL: 24 * time.Hour, Now: func() time.Time { return now }}
	ctx := context.Background()
	m := md("workers", "1")

	first, err := iss.BootstrapToken(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	id, secret, ok := strings.Cut(first.Value, ".")
	if !ok || len(id) != 6 || len(secret) != 16 || !first.Expires.Equal(now.Add(24*time.Hour)) {
		t.Fatalf("token %q expiring %s", first.Value, first.Expires)
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "bootstrap-token-" + id}, s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "bootstrap.kubernetes.io/token" || string(s.Data["auth-extra-groups"]) != credentials.NodeBootstrapGroup ||
		string(s.Data["usage-bootstrap-authentication"]) != "true" || s.Annotations[credentials.AnnotationOwner] != "kube-system/workers" {
		t.Errorf("token Secret = %+v", s)
	}

	now = now.Add(10 * time.Hour) // 14h left, more than a third: reused as is
	again, err := iss.BootstrapToken(ctx, m)
	if err != nil || again != first {
		t.Fatalf("reuse: %v %v", again, err)
	}

	now = now.Add(6 * time.Hour) // 8h left, a third: extended, same value
	extended, err := iss.BootstrapToken(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if extended.Value != first.Value || !extended.Expires.Equal(now.Add(24*time.Hour)) {
		t.Errorf("extension changed the token or missed the expiry: %+v", extended)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil || string(s.Data["expiration"]) != now.Add(24*time.Hour).Format(time.RFC3339) {
		t.Errorf("expiration not written: %s (%v)", s.Data["expiration"], err)
	}

	// Another MachineDeployment gets its own token; the id is derived from the UID.
	other, err := iss.BootstrapToken(ctx, md("other", "2"))
	if err != nil || other.Value == first.Value {
		t.Fatalf("other MachineDeployment: %v %v", other, err)
	}

	if err := iss.Revoke(ctx, m); err != nil {
		t.Fatal(err)
	}
	list := &corev1.SecretList{}
	if err := c.List(ctx, list, client.InNamespace("kube-system")); err != nil || len(list.Items) != 1 {
		t.Errorf("after revoking one MachineDeployment: %d token Secrets left (want the other's only), %v", len(list.Items), err)
	}
}

func TestTokenValidity(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		tok  credentials.Token
		want bool
	}{
		{credentials.Token{Value: "x", Expires: now.Add(time.Hour)}, true},
		{credentials.Token{Value: "x", Expires: now.Add(time.Minute)}, false},
		{credentials.Token{Value: "", Expires: now.Add(time.Hour)}, false},
		{credentials.Token{Value: "x"}, false},
	} {
		if got := tc.tok.Valid(now, 10*time.Minute); got != tc.want {
			t.Errorf("%+v valid = %v, want %v", tc.tok, got, tc.want)
		}
	}
}
