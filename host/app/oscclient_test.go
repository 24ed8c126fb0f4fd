package app

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/testenv"
)

// TestOSCCreateClientCreatesWithoutReadingBack: an OSC created through oscCreateClient is on the API server as
// sent, a second create fails with AlreadyExists as through the plain client, and other kinds go through the
// plain client (their object is read back).
func TestOSCCreateClientCreatesWithoutReadingBack(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newOSCCreateClient(env.Client, env.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "osm"}}); err != nil {
		t.Fatal(err)
	}
	perm := int32(600)
	sent := &osmv1alpha1.OperatingSystemConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "osm", Name: "a", Annotations: map[string]string{"k": "v"}},
		Spec: osmv1alpha1.OperatingSystemConfigSpec{OSName: "ubuntu", OSVersion: "24.04", ProvisioningUtility: "cloud-init",
			CloudProvider: osmv1alpha1.CloudProviderSpec{Name: "aws"},
			ProvisioningConfig: osmv1alpha1.OSCConfig{Files: []osmv1alpha1.File{{Path: "/etc/x", Permissions: &perm,
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "x\n"}}}}}},
		Status: osmv1alpha1.OperatingSystemConfigStatus{Conditions: []metav1.Condition{{Type: osmv1alpha1.ConditionReady,
			Status: metav1.ConditionTrue, Reason: "Rendered", Message: "ok", LastTransitionTime: metav1.Now()}}},
	}
	if err := c.Create(ctx, sent); err != nil {
		t.Fatal(err)
	}
	if sent.UID != "" {
		t.Errorf("the OSC was read back (uid %s)", sent.UID)
	}
	got := &osmv1alpha1.OperatingSystemConfig{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sent), got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sent.Spec, got.Spec); diff != "" || got.Annotations["k"] != "v" || len(got.Status.Conditions) != 1 {
		t.Errorf("stored OSC differs from the one sent: annotations %v, conditions %v, spec (-sent +stored):\n%s", got.Annotations, got.Status.Conditions, diff)
	}
	if err := c.Create(ctx, sent.DeepCopy()); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: want AlreadyExists, got %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}
	if err := c.Create(ctx, ns); err != nil || ns.UID == "" {
		t.Errorf("other kinds go through the plain client: %v, uid %q", err, ns.UID)
	}
}
