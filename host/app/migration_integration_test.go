package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/controllers/osc"
	ospctl "github.com/osmhq/osm/host/controllers/osp"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins"
)

// TestMigrationFromUpstream follows docs/migration.md from what upstream OSM v1.11.2 leaves in a cluster:
// upstream's CRDs, RBAC and default profiles (testdata with provenance), two MachineDeployments with upstream's
// OperatingSystemConfigs "<md>-<ns>-config", user-data Secrets and kubelet bootstrap Secrets, and the shared
// cloud-init-getter token. The guide's steps (OSM's CRDs and RBAC applied over upstream's, the getter token
// deleted) and OSM's controller started as its ServiceAccount, with its start-up check: every upstream default
// profile is replaced by OSM's v2 one, an operator's own profile is not, every MachineDeployment is
// re-rendered by OSM from OSM's profile, upstream's OSCs and kubelet bootstrap Secrets are removed, and the
// MachineDeployments can be patched at every step.
func TestMigrationFromUpstream(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)

	// What upstream v1.11.2 left.
	applyAll(t, env, upstreamDocs(t, "rbac-controller.yaml"))
	useUpstreamCRDs(t, env)
	entries, err := os.ReadDir(filepath.Join(upstreamData, "osps"))
	if err != nil {
		t.Fatal(err)
	}
	var upstreamDefaults []string
	for _, e := range entries {
		applyAll(t, env, upstreamDocs(t, filepath.Join("osps", e.Name())))
		upstreamDefaults = append(upstreamDefaults, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	// An operator's profile, templates only, copied from upstream's Ubuntu one under its own name.
	custom := upstreamDocs(t, filepath.Join("osps", "osp-ubuntu.yaml"))[0]
	custom.SetName("osp-ubuntu-site")
	applyAll(t, env, []*unstructured.Unstructured{custom})

	mds := []*clusterv1alpha1.MachineDeployment{newMD(t, "workers", "ubuntu", "aws", "osp-ubuntu"), newMD(t, "site", "ubuntu", "aws", "osp-ubuntu-site")}
	for _, md := range mds {
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		leaveUpstreamObjects(t, env, md)
	}
	getter := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: userDataNS, Name: "cloud-init-getter-token",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "cloud-init-getter"}}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"token": []byte("shared-token-reading-every-user-data-secret")}}
	if err := c.Create(ctx, getter); err != nil {
		t.Fatal(err)
	}
	patchMDs := func(step string) {
		t.Helper()
		for _, md := range mds {
			p := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"migration-step":%q}}}`, step))
			if err := c.Patch(ctx, &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: md.Namespace, Name: md.Name}},
				client.RawPatch(types.MergePatchType, p)); err != nil {
				t.Errorf("%s: patching MachineDeployment %s: %v", step, md.Name, err)
			}
		}
	}
	patchMDs("upstream")

	// The guide: OSM's CRDs and RBAC over upstream's, then the shared getter token goes.
	useOSMCRDs(t, env)
	applyAll(t, env, deployRBAC(t))
	patchMDs("manifests applied")
	if err := c.Delete(ctx, getter); err != nil {
		t.Fatal(err)
	}

	asController := rest.CopyConfig(env.Config)
	asController.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:operating-system-manager"}
	sa := &testenv.Env{Config: asController, Client: env.Client, Webhook: env.Webhook}
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	startOSM(t, sa, nil, app.Options{Builtins: plugins.Builtin(), Defaults: defaults, Preflight: true, WorkerCount: 2})
	patchMDs("controller started")

	for _, name := range upstreamDefaults {
		eventually(t, wait, "upstream's "+name+" taken over", func() error {
			o := &osmv1alpha1.OperatingSystemProfile{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: name}, o); err != nil {
				return err
			}
			if o.Spec.Plugin == nil || o.Spec.Version != "v2.0.0" || o.Labels[ospctl.LabelDefault] != "true" {
				return fmt.Errorf("%s at %s, plugin %v, labels %v", name, o.Spec.Version, o.Spec.Plugin, o.Labels)
			}
			return nil
		})
	}
	site := &osmv1alpha1.OperatingSystemProfile{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "osp-ubuntu-site"}, site); err != nil || site.Spec.Version != "v1.11.2" || site.Spec.Plugin != nil {
		t.Errorf("the operator's profile changed: %v %+v", err, site.Spec.Version)
	}

	for _, md := range mds {
		eventually(t, wait, "MachineDeployment "+md.Name+" rendered by OSM, upstream's leftovers gone", func() error {
			cur := &osmv1alpha1.OperatingSystemConfig{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: md.Name + "." + md.Namespace + "-config"}, cur); err != nil {
				return fmt.Errorf("OSM's OSC: %w", err)
			}
			if cur.Annotations[osc.AnnotationRenderHash] == "" {
				return fmt.Errorf("OSM's OSC is not rendered yet")
			}
			s := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: md.Name + "-" + md.Namespace + "-bootstrap-config"}, s); err != nil {
				return err
			}
			if s.Annotations[osc.AnnotationRenderHash] == "" || strings.Contains(string(s.Data["cloud-config"]), "upstream") {
				return fmt.Errorf("bootstrap Secret still upstream's: %v", s.Annotations)
			}
			for _, o := range []client.Object{
				&osmv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Namespace: osmNamespace, Name: osc.UpstreamOSCName(md)}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: userDataNS, Name: osc.UpstreamKubeletSecretName(md)}},
			} {
				if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
					return fmt.Errorf("upstream's %s still there (%w)", o.GetName(), err)
				}
			}
			return nil
		})
	}
	if s := waitForSecret(t, c, "workers-kube-system-provisioning-config", "1"); !strings.Contains(string(s.Data["cloud-config"]), "osm-setup") {
		t.Errorf("the provisioning Secret of workers is not rendered from OSM's osp-ubuntu")
	}
	patchMDs("migrated")
}

// leaveUpstreamObjects creates what upstream OSM v1.11.2 writes for md: its OSC in -namespace, the two
// user-data Secrets and the kubelet bootstrap kubeconfig Secret.
func leaveUpstreamObjects(t *testing.T, env *testenv.Env, md *clusterv1alpha1.MachineDeployment) {
	t.Helper()
	ctx := context.Background()
	ann := map[string]string{"k8c.io/machine-deployment-revision": "1", "k8c.io/operating-system-profile-version": "v1.11.2"}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(`apiVersion: operatingsystemmanager.k8c.io/v1alpha1
kind: OperatingSystemConfig
metadata: {name: %s, namespace: %s}
spec:
  osName: ubuntu
  osVersion: "24.04"
  cloudProvider: {name: aws, spec: {}}
  provisioningUtility: cloud-init
  bootstrapConfig:
    files: [{path: /opt/bin/bootstrap, content: {inline: {data: "#!/bin/bash\necho upstream\n"}}}]
  provisioningConfig:
    files: [{path: /opt/bin/setup, content: {inline: {data: "#!/bin/bash\necho upstream\n"}}}]
`, osc.UpstreamOSCName(md), osmNamespace)), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetAnnotations(ann)
	if err := env.Client.Create(ctx, u); err != nil {
		t.Fatalf("upstream's OSC: %v", err)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: md.Name + "-" + md.Namespace + "-bootstrap-config"}, Data: map[string][]byte{"cloud-config": []byte("#cloud-config\n# upstream\n")}},
		{ObjectMeta: metav1.ObjectMeta{Name: md.Name + "-" + md.Namespace + "-provisioning-config"}, Data: map[string][]byte{"cloud-config": []byte("#cloud-config\n# upstream\n")}},
		{ObjectMeta: metav1.ObjectMeta{Name: osc.UpstreamKubeletSecretName(md)}, Data: map[string][]byte{"kubeconfig": []byte("upstream bootstrap kubeconfig with a token")}},
	} {
		s.Namespace = userDataNS
		s.Annotations = ann
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatalf("upstream's Secret %s: %v", s.Name, err)
		}
	}
}
