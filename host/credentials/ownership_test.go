package credentials

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/scheme"
)

// TestCredentialsAreNeverTakenFromOthers: a bootstrap token id or a Role/RoleBinding name that is taken by
// an object not marked as the MachineDeployment's is skipped (token ids) or refused (names), never reused.
func TestCredentialsAreNeverTakenFromOthers(t *testing.T) {
	ctx := context.Background()
	md := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "c", Name: "a-b", UID: apitypes.UID("uid-1")}}
	other := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "b-c", Name: "a", UID: apitypes.UID("uid-2")}}

	// Candidate 0 belongs to another MachineDeployment, candidate 1 to nobody OSM knows (a kubeadm token).
	taken := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: bootstrapTokenNamespace, Name: "bootstrap-token-" + bootstrapTokenID(md, 0),
			Labels: Labels(other), Annotations: Annotations(other)}, Type: bootstrapTokenType,
			Data: map[string][]byte{"token-id": []byte(bootstrapTokenID(md, 0)), "token-secret": []byte("theirs0000000000")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: bootstrapTokenNamespace, Name: "bootstrap-token-" + bootstrapTokenID(md, 1)}, Type: bootstrapTokenType,
			Data: map[string][]byte{"token-id": []byte(bootstrapTokenID(md, 1)), "token-secret": []byte("kubeadm000000000")}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(taken[0], taken[1]).Build()
	iss := &Issuer{Client: c, Namespace: "cloud-init-settings"}
	tok, err := iss.BootstrapToken(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.Value, bootstrapTokenID(md, 2)+".") {
		t.Errorf("token %s, want the third candidate id %s", tok.Value, bootstrapTokenID(md, 2))
	}
	again, err := iss.BootstrapToken(ctx, md)
	if err != nil || again.Value != tok.Value {
		t.Errorf("the token is not found again: %v %v", again, err)
	}

	// A Role under the name OSM chose for md, not marked as md's: refused, naming why.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "cloud-init-settings", Name: ProvisioningReaderName(md)}}
	c = fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(role).Build()
	iss = &Issuer{Client: c, Namespace: "cloud-init-settings"}
	err = iss.EnsureReaderRole(ctx, md)
	if err == nil || !strings.Contains(err.Error(), "was not created by OSM") {
		t.Fatalf("want the foreign Role refused, got %v", err)
	}
	// The same for a RoleBinding of another MachineDeployment: it is neither bound to md's token nor changed.
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "cloud-init-settings", Name: ProvisioningReaderName(md),
		Labels: Labels(other), Annotations: Annotations(other)},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:bootstrap:theirs"}}}
	c = fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(rb).Build()
	iss = &Issuer{Client: c, Namespace: "cloud-init-settings"}
	err = iss.BindReader(ctx, md, tok)
	if err == nil || !strings.Contains(err.Error(), "belongs to MachineDeployment b-c/a") {
		t.Fatalf("want b-c/a's RoleBinding refused, got %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(rb), rb); err != nil || rb.Subjects[0].Name != "system:bootstrap:theirs" {
		t.Errorf("b-c/a's RoleBinding was changed: %v %v", rb.Subjects, err)
	}

	// Revoking one MachineDeployment leaves the other's token.
	c = fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(taken[0]).Build()
	iss = &Issuer{Client: c, Namespace: "cloud-init-settings"}
	if err := iss.Revoke(ctx, md); err != nil {
		t.Fatal(err)
	}
	left := &corev1.SecretList{}
	if err := c.List(ctx, left); err != nil || len(left.Items) != 1 {
		t.Errorf("after revoking c/a-b: %d token Secrets left, want b-c/a's (%v)", len(left.Items), err)
	}
}

// TestBindReaderRepointsItsOwnBinding: md's reader RoleBinding that names another subject (the ServiceAccount an
// earlier OSM version issued tokens for, or a bootstrap token since replaced) is pointed at the current
// token's user, which takes the old credential's access away; a binding that already names it is left as is.
func TestBindReaderRepointsItsOwnBinding(t *testing.T) {
	ctx := context.Background()
	md := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "workers", UID: apitypes.UID("uid-1")}}
	old := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "cloud-init-settings", Name: ProvisioningReaderName(md),
		Labels: Labels(md), Annotations: Annotations(md)},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ProvisioningReaderName(md)},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "cloud-init-settings", Name: ProvisioningReaderName(md)}}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(old).Build()
	iss := &Issuer{Client: c, Namespace: "cloud-init-settings"}
	tok := Token{Value: "abcdef.0123456789abcdef"}
	if err := iss.BindReader(ctx, md, tok); err != nil {
		t.Fatal(err)
	}
	got := &rbacv1.RoleBinding{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), got); err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:bootstrap:abcdef"}}
	if !reflect.DeepEqual(got.Subjects, want) {
		t.Errorf("subjects %v, want %v", got.Subjects, want)
	}
	rv := got.ResourceVersion
	if err := iss.BindReader(ctx, md, tok); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), got); err != nil || got.ResourceVersion != rv {
		t.Errorf("a binding already naming the token's user was written again (%s → %s, %v)", rv, got.ResourceVersion, err)
	}
}
