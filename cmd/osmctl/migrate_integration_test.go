package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/testenv"
)

// TestMigrateBackCommand runs `osmctl migrate back` against a real API server holding one MachineDeployment
// OSM rendered from a profile of its own that renders through a plugin: --dry-run lists the changes and the
// warning and changes nothing; without it the command refuses (exit 3) and changes nothing; once the
// MachineDeployment names a default profile it restores the getter and removes OSM's Secret, and, with no token
// controller in this control plane to fill the getter token, says so (exit 1).
func TestMigrateBackCommand(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	for _, ns := range []string{"cloud-init-settings"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	osp := &osmv1alpha1.OperatingSystemProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "osp-site"},
		Spec: osmv1alpha1.OperatingSystemProfileSpec{OSName: "ubuntu", OSVersion: "24.04", Version: "v1.0.0",
			SupportedCloudProviders: []osmv1alpha1.CloudProviderSpec{{Name: "aws"}}, Plugin: &osmv1alpha1.PluginReference{Builtin: "ubuntu"}}}
	pc, _ := json.Marshal(map[string]any{"cloudProvider": "aws", "operatingSystem": "ubuntu", "cloudProviderSpec": map[string]any{}})
	md := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "workers",
		Annotations: map[string]string{clusterv1alpha1.AnnotationOSP: "osp-site"}},
		Spec: clusterv1alpha1.MachineDeploymentSpec{Template: clusterv1alpha1.MachineTemplateSpec{Spec: clusterv1alpha1.MachineSpec{
			ProviderSpec: clusterv1alpha1.ProviderSpec{Value: &runtime.RawExtension{Raw: pc}}}}}}
	for _, o := range []client.Object{osp, md} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	userData := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cloud-init-settings", Name: "workers-kube-system-bootstrap-config"}}
	credentials.Mark(md, userData)
	if err := c.Create(ctx, userData); err != nil {
		t.Fatal(err)
	}
	kc := "--kubeconfig=" + env.Kubeconfig

	dry := osmctl(t, "migrate", "back", "--dry-run", kc)
	if dry.code != 0 || !strings.Contains(dry.stdout, "would create ServiceAccount cloud-init-settings/cloud-init-getter") ||
		!strings.Contains(dry.stdout, "would delete Secret cloud-init-settings/workers-kube-system-bootstrap-config: OSM's user-data") ||
		!strings.Contains(dry.stderr, "WARNING: OperatingSystemProfile kube-system/osp-site: renders through a plugin") ||
		!strings.Contains(dry.stderr, "kube-system/workers") {
		t.Errorf("dry run: %s", dry)
	}
	refused := osmctl(t, "migrate", "back", kc)
	if refused.code != exitRefused || !strings.Contains(refused.stderr, "--force") {
		t.Errorf("with a MachineDeployment naming a plugin profile: %s", refused)
	}
	for _, o := range []client.Object{userData, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "cloud-init-settings", Name: "cloud-init-getter"}}} {
		err := c.Get(ctx, client.ObjectKeyFromObject(o), o)
		if _, isSecret := o.(*corev1.Secret); isSecret == (err != nil) || (!isSecret && !apierrors.IsNotFound(err)) {
			t.Errorf("a dry run or a refused run changed %s: %v", o.GetName(), err)
		}
	}

	md.Annotations[clusterv1alpha1.AnnotationOSP] = "osp-ubuntu"
	if err := c.Update(ctx, md); err != nil {
		t.Fatal(err)
	}
	done := osmctl(t, "migrate", "back", kc, "--token-wait=1s")
	if done.code != 1 || !strings.Contains(done.stdout, "create Secret cloud-init-settings/cloud-init-getter-token") ||
		!strings.Contains(done.stderr, "token controller") {
		t.Errorf("going back without a token controller: %s", done)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(userData), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("OSM's user-data Secret is still there: %v", err)
	}
	again := osmctl(t, "migrate", "back", "--dry-run", kc)
	if again.code != 0 || strings.TrimSpace(again.stdout) != "nothing to change" {
		t.Errorf("a second dry run: %s", again)
	}
}
