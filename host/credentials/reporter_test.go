package credentials

import (
	"context"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/scheme"
)

// TestReaderRoleReportRule: the reader Role grants the node credential patch on its own report's status only
// (not the object, not create); with reports off it grants none; a Role of an OSM version before reports gains
// the rule, a foreign one is still refused.
func TestReaderRoleReportRule(t *testing.T) {
	ctx := context.Background()
	md := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "workers", UID: apitypes.UID("uid-1")}}
	key := client.ObjectKey{Namespace: "cloud-init-settings", Name: ProvisioningReaderName(md)}
	want := rbacv1.PolicyRule{APIGroups: []string{"operatingsystemmanager.k8c.io"}, Resources: []string{"operatingsystemnodereports/status"},
		Verbs: []string{"get", "patch"}, ResourceNames: []string{render.ProvisioningSecretName(md)}}
	secretsOnly := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"},
		ResourceNames: []string{render.ProvisioningSecretName(md), render.KubeletBootstrapSecretName(md)}}

	for _, tc := range []struct {
		name     string
		existing *rbacv1.Role
		off      bool
		want     []rbacv1.PolicyRule
	}{
		{name: "new Role", want: []rbacv1.PolicyRule{secretsOnly, want}},
		{name: "reports off", off: true, want: []rbacv1.PolicyRule{secretsOnly}},
		{name: "Role of an OSM version before reports", want: []rbacv1.PolicyRule{secretsOnly, want},
			existing: &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: Labels(md), Annotations: Annotations(md)},
				Rules: []rbacv1.PolicyRule{secretsOnly}}},
		{name: "reports turned off again", off: true, want: []rbacv1.PolicyRule{secretsOnly},
			existing: &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: Labels(md), Annotations: Annotations(md)},
				Rules: []rbacv1.PolicyRule{secretsOnly, want}}},
	} {
		ensures := map[string]func(*Issuer) error{"EnsureReaderRole": func(i *Issuer) error { return i.EnsureReaderRole(ctx, md) }}
		if tc.existing != nil {
			// The report controller's AlignReaderRole brings an existing Role in line the same way.
			ensures["AlignReaderRole"] = func(i *Issuer) error { return i.AlignReaderRole(ctx, md) }
		}
		for fn, ensure := range ensures {
			t.Run(tc.name+"/"+fn, func(t *testing.T) {
				b := fake.NewClientBuilder().WithScheme(scheme.Scheme)
				if tc.existing != nil {
					b = b.WithObjects(tc.existing.DeepCopy())
				}
				c := b.Build()
				iss := &Issuer{Client: c, Namespace: key.Namespace, NoNodeReports: tc.off}
				if err := ensure(iss); err != nil {
					t.Fatal(err)
				}
				role := &rbacv1.Role{}
				if err := c.Get(ctx, key, role); err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(role.Rules, tc.want, func(a, b rbacv1.PolicyRule) bool {
					return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.APIGroups, b.APIGroups)
				}) {
					t.Errorf("rules %+v, want %+v", role.Rules, tc.want)
				}
			})
		}
	}
}

// TestAlignReaderRoleNeverCreates: the report controller leaves a missing Role to the OSC controller, so a new
// MachineDeployment's Role is created once (TestAPIWritesPerMachineDeployment counts the attempts).
func TestAlignReaderRoleNeverCreates(t *testing.T) {
	ctx := context.Background()
	md := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "workers", UID: apitypes.UID("uid-1")}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	iss := &Issuer{Client: c, Namespace: "cloud-init-settings"}
	if err := iss.AlignReaderRole(ctx, md); err != nil {
		t.Fatal(err)
	}
	roles := &rbacv1.RoleList{}
	if err := c.List(ctx, roles); err != nil || len(roles.Items) != 0 {
		t.Errorf("AlignReaderRole of a missing Role: %d Roles (%v), want none", len(roles.Items), err)
	}
}
