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

// TestWritesAnsweredWithMetadata: an OSC or a Secret created or updated through metadataAnswerClient is on
// the API server as sent, the object sent gets the metadata the API server set (so a conditional update can
// follow), a conflicting write fails as through the plain client (AlreadyExists, Conflict), and other kinds go
// through the plain client.
func TestWritesAnsweredWithMetadata(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newMetadataAnswerClient(env.Client, env.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "osm"}}); err != nil {
		t.Fatal(err)
	}
	perm := int32(600)
	osc := &osmv1alpha1.OperatingSystemConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "osm", Name: "a", Annotations: map[string]string{"k": "v"}},
		Spec: osmv1alpha1.OperatingSystemConfigSpec{OSName: "ubuntu", OSVersion: "24.04", ProvisioningUtility: "cloud-init",
			CloudProvider: osmv1alpha1.CloudProviderSpec{Name: "aws"},
			ProvisioningConfig: osmv1alpha1.OSCConfig{Files: []osmv1alpha1.File{{Path: "/etc/x", Permissions: &perm,
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "x\n"}}}}}},
		Status: osmv1alpha1.OperatingSystemConfigStatus{Conditions: []metav1.Condition{{Type: osmv1alpha1.ConditionReady,
			Status: metav1.ConditionTrue, Reason: "Rendered", Message: "ok", LastTransitionTime: metav1.Now()}}},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "osm", Name: "user-data", Annotations: map[string]string{"k": "v"}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"cloud-config": []byte("#cloud-config\n")}}
	for _, sent := range []client.Object{osc, secret} {
		if err := c.Create(ctx, sent); err != nil {
			t.Fatal(err)
		}
		got := sent.DeepCopyObject().(client.Object)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sent), got); err != nil {
			t.Fatal(err)
		}
		if sent.GetUID() == "" || sent.GetUID() != got.GetUID() || sent.GetResourceVersion() != got.GetResourceVersion() {
			t.Errorf("%T: the API server's metadata was not copied into the object sent: uid %q rv %q, stored uid %q rv %q",
				sent, sent.GetUID(), sent.GetResourceVersion(), got.GetUID(), got.GetResourceVersion())
		}
		if !sent.GetObjectKind().GroupVersionKind().Empty() {
			t.Errorf("%T: the object sent keeps the kind set for encoding: %v", sent, sent.GetObjectKind().GroupVersionKind())
		}
		again := sent.DeepCopyObject().(client.Object)
		again.SetResourceVersion("")
		if err := c.Create(ctx, again); !apierrors.IsAlreadyExists(err) {
			t.Errorf("%T: second create: want AlreadyExists, got %v", sent, err)
		}
	}
	got := &osmv1alpha1.OperatingSystemConfig{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(osc), got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(osc.Spec, got.Spec); diff != "" || got.Annotations["k"] != "v" || len(got.Status.Conditions) != 1 {
		t.Errorf("stored OSC differs from the one sent: annotations %v, conditions %v, spec (-sent +stored):\n%s", got.Annotations, got.Status.Conditions, diff)
	}

	stale := secret.DeepCopy()
	secret.Data["cloud-config"] = []byte("#cloud-config\nruncmd: [true]\n")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	stored := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), stored); err != nil {
		t.Fatal(err)
	}
	if string(stored.Data["cloud-config"]) != string(secret.Data["cloud-config"]) || stored.ResourceVersion != secret.ResourceVersion {
		t.Errorf("update: stored %q at rv %s, sent rv now %s", stored.Data["cloud-config"], stored.ResourceVersion, secret.ResourceVersion)
	}
	if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("an update from a stale read: want Conflict, got %v", err)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}
	if err := c.Create(ctx, ns); err != nil || ns.UID == "" {
		t.Errorf("other kinds go through the plain client: %v, uid %q", err, ns.UID)
	}
}
