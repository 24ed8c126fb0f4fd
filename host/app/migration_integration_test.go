package app_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/controllers/osc"
	ospctl "github.com/osmhq/osm/host/controllers/osp"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins"
)

// TestMigrationFromUpstream follows docs/migration.md from what upstream OSM v1.11.2 really left in a cluster:
// the capture of testdata/upstream-v1.11.2/capture (hack/capture-upstream ran upstream's own controller): six
// MachineDeployments in two namespaces, three clouds and four operating systems, upstream's default profiles,
// OperatingSystemConfigs, 12 immutable user-data Secrets, kubelet bootstrap Secrets, bootstrap tokens and the
// getter token with its Role, upstream's webhook configurations, CRDs and RBAC. The guide's steps run in order
// (webhooks removed, OSM's CRDs and RBAC applied, upstream's own RBAC deleted by the guide's commands, the
// getter revoked) and OSM's controller starts as its ServiceAccount with its start-up check. Then: every
// upstream default profile is OSM's v2 one, an operator's own profile is untouched, every MachineDeployment's
// user-data is OSM's (upstream's immutable Secrets replaced), upstream's OSCs and kubelet bootstrap Secrets are
// gone and OSM left no kubelet bootstrap Secret its profiles do not use, no write was refused (no WriteFailed
// event), and the MachineDeployments can be patched at every step.
func TestMigrationFromUpstream(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	mds, upstreamDefaults := leaveCapturedUpstream(t, env)
	removeUpstreamWebhooks(t, env)

	// An operator's profile, templates only, copied from upstream's Ubuntu one under its own name, and a
	// MachineDeployment using it.
	custom := upstreamDocs(t, filepath.Join("osps", "osp-ubuntu.yaml"))[0]
	custom.SetName("osp-ubuntu-site")
	applyAll(t, env, []*unstructured.Unstructured{custom})
	site := newMD(t, "site", "ubuntu", "aws", "osp-ubuntu-site")
	if err := c.Create(ctx, site); err != nil {
		t.Fatal(err)
	}
	mds = append(mds, site)
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

	takeOver(t, env, patchMDs)
	started := time.Now()

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
	siteOSP := &osmv1alpha1.OperatingSystemProfile{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "osp-ubuntu-site"}, siteOSP); err != nil || siteOSP.Spec.Version != "v1.11.2" || siteOSP.Spec.Plugin != nil {
		t.Errorf("the operator's profile changed: %v %+v", err, siteOSP.Spec.Version)
	}

	for _, md := range mds {
		eventually(t, wait, "MachineDeployment "+md.Namespace+"/"+md.Name+" rendered by OSM, upstream's leftovers gone", func() error {
			return renderedByOSM(ctx, c, md)
		})
	}
	t.Logf("every MachineDeployment had OSM's user-data %s after the guide's step 4 (the controller started right before it)", time.Since(started).Round(time.Millisecond))
	if s := waitForSecret(t, c, "ubuntu-aws-kube-system-provisioning-config", "1"); !strings.Contains(string(s.Data["cloud-config"]), "osm-setup") {
		t.Errorf("the provisioning Secret of ubuntu-aws is not rendered from OSM's osp-ubuntu")
	}
	noRefusedWrites(t, c, mds)
	// Drift compares with what the machines were booted with: upstream's configuration for the captured
	// MachineDeployments, OSM's own first render for the one upstream never saw.
	for _, md := range mds {
		cur := &osmv1alpha1.OperatingSystemConfig{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: md.Name + "." + md.Namespace + "-config"}, cur); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(cur.Status.Conditions, osmv1alpha1.ConditionDrifted)
		switch {
		case cond == nil:
			t.Errorf("%s: no Drifted condition", md.Name)
		case md.Name == "site" && cond.Status != metav1.ConditionFalse:
			t.Errorf("%s, rendered by OSM only: Drifted %s: %s", md.Name, cond.Status, cond.Message)
		case md.Name != "site" && (cond.Status != metav1.ConditionTrue || cur.Status.Drift == nil ||
			cur.Status.Drift.ProvisionedProfileVersion != "v1.11.2" || !strings.Contains(cond.Message, "plugin, profile (v1.11.2 → v2.0.0))") ||
			// the test's patches of the MachineDeployments' annotations may add machineDeployment
			!slices.Contains(cur.Status.Drift.Inputs, "build") || slices.ContainsFunc(cur.Status.Drift.Inputs, func(in string) bool {
			return in == "flags" || in == "ca" || in == "cluster" || in == "extensions"
		})):
			t.Errorf("%s, booted from upstream's user-data: Drifted %s: %s (%+v)", md.Name, cond.Status, cond.Message, cur.Status.Drift)
		}
	}
	drifted := map[string]bool{}
	for _, ns := range []string{"kube-system", "team-a"} {
		events := &corev1.EventList{}
		if err := c.List(ctx, events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Reason == osmv1alpha1.ConditionDrifted && e.Type == corev1.EventTypeWarning {
				drifted[e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name] = true
			}
		}
	}
	for _, md := range mds {
		if want := md.Name != "site"; drifted[md.Namespace+"/"+md.Name] != want {
			t.Errorf("%s/%s: a Drifted event %v, want %v", md.Namespace, md.Name, drifted[md.Namespace+"/"+md.Name], want)
		}
	}
	patchMDs("migrated")
}

// leaveCapturedUpstream puts into env what upstream OSM v1.11.2 left (testdata/upstream-v1.11.2/capture, and
// upstream's CRDs, RBAC and webhook configurations), with kube-public/cluster-info, and returns the captured
// MachineDeployments and the names of upstream's default profiles.
func leaveCapturedUpstream(t *testing.T, env *testenv.Env) ([]*clusterv1alpha1.MachineDeployment, []string) {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	applyAll(t, env, upstreamDocs(t, "rbac-controller.yaml"))
	useUpstreamCRDs(t, env)
	files, err := filepath.Glob(filepath.Join(upstreamData, "capture", "[1-7]*.yaml"))
	if err != nil || len(files) != 7 {
		t.Fatalf("the capture: %v %v", files, err)
	}
	for _, f := range files {
		applyAll(t, env, upstreamDocs(t, strings.TrimPrefix(f, upstreamData+"/")))
	}
	// Upstream's webhook as its manifests install it (Deployment, Service, configurations, RBAC), and its
	// cert-manager Issuer and Certificate with the Secret cert-manager issues, under stand-ins of cert-manager's
	// CRDs. The configurations' CA would come from cert-manager's injector, which this cluster lacks.
	certManagerCRDs(t, env)
	for _, f := range []string{"80-webhook.yaml", "80-webhook-rbac.yaml", "80-cert-manager.yaml"} {
		applyAll(t, env, upstreamDocs(t, filepath.Join("capture", f)))
	}
	issued := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "webhook-server-cert"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: []byte("issued by cert-manager"), corev1.TLSPrivateKeyKey: []byte("issued by cert-manager")}}
	if err := env.Client.Create(ctx, issued); err != nil {
		t.Fatal(err)
	}
	immutable := 0
	secrets := &corev1.SecretList{}
	if err := env.Client.List(ctx, secrets, client.InNamespace(userDataNS)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if s.Immutable != nil && *s.Immutable {
			immutable++
		}
	}
	if immutable != 12 {
		t.Fatalf("the capture holds %d immutable user-data Secrets, want 12", immutable)
	}
	list := &clusterv1alpha1.MachineDeploymentList{}
	if err := env.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	var mds []*clusterv1alpha1.MachineDeployment
	for i := range list.Items {
		mds = append(mds, &list.Items[i])
	}
	osps := &osmv1alpha1.OperatingSystemProfileList{}
	if err := env.Client.List(ctx, osps, client.InNamespace(osmNamespace)); err != nil {
		t.Fatal(err)
	}
	var defaults []string
	for _, o := range osps.Items {
		defaults = append(defaults, o.Name)
	}
	if len(mds) != 6 || len(defaults) != 6 {
		t.Fatalf("the capture holds %d MachineDeployments and %d profiles, want 6 and 6", len(mds), len(defaults))
	}
	return mds, defaults
}

// removeUpstreamWebhooks is the guide's step 1 (docs/migration.md): upstream's webhook configurations, which
// refuse every MachineDeployment and profile write while no webhook serves them.
func removeUpstreamWebhooks(t *testing.T, env *testenv.Env) {
	t.Helper()
	md := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ubuntu-aws"}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"migration-step":"webhooks"}}}`))
	if err := env.Client.Patch(context.Background(), md, patch); err == nil || !strings.Contains(err.Error(), "operating-system-manager-webhook") {
		t.Errorf("with upstream's webhook configurations and no webhook, a MachineDeployment patch gave %v", err)
	}
	for _, o := range guideUpstreamWebhook() {
		if err := env.Client.Delete(context.Background(), o); err != nil {
			t.Fatalf("step 1: deleting %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	for _, kind := range []string{"Issuer", "Certificate"} {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: kind + "List"})
		if err := env.Client.List(context.Background(), l); err != nil || len(l.Items) != 0 {
			t.Errorf("after step 1, cert-manager %ss: %v %v", kind, len(l.Items), err)
		}
	}
	if err := env.Client.Patch(context.Background(), md, patch); err != nil {
		t.Errorf("without upstream's webhooks: %v", err)
	}
}

// takeOver runs the guide's steps 2 to 4 (docs/migration.md) on a cluster upstream left, OSM's controller
// started as its ServiceAccount with its start-up check, calling patchMDs after each step. It returns what stops
// the controller (the test's end does, too).
func takeOver(t *testing.T, env *testenv.Env, patchMDs func(step string)) (stop func()) {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	// Step 2: OSM's CRDs and RBAC over upstream's.
	useOSMCRDs(t, env)
	applyAll(t, env, deployRBAC(t))
	patchMDs("manifests applied")
	// The guide's RBAC step: upstream's own objects only (OSM's Roles in kube-system and cloud-init-settings
	// have upstream's names and replaced them in step 2).
	for _, o := range guideUpstreamRBAC() {
		if err := c.Delete(ctx, o); err != nil {
			t.Fatalf("deleting upstream's RBAC %T %s/%s: %v", o, o.GetNamespace(), o.GetName(), err)
		}
	}

	asController := rest.CopyConfig(env.Config)
	asController.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:operating-system-manager"}
	sa := &testenv.Env{Config: asController, Client: env.Client, Webhook: env.Webhook}
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stopOSM := startStoppable(t, sa, nil, app.Options{Builtins: plugins.Builtin(), Defaults: defaults, Preflight: true, WorkerCount: 2})
	stop = func() {
		if !stopped {
			stopped = true
			stopOSM()
		}
	}
	t.Cleanup(stop)
	patchMDs("controller started")

	// Step 4: the getter revoked.
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: userDataNS, Name: "cloud-init-getter-token"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: userDataNS, Name: "cloud-init-getter"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: userDataNS, Name: "cloud-init-getter"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: userDataNS, Name: "cloud-init-getter"}},
	} {
		if err := c.Delete(ctx, o); err != nil {
			t.Fatalf("step 4: %v", err)
		}
	}
	patchMDs("getter revoked")
	return stop
}

// guideUpstreamWebhook are the objects the guide's step 1 deletes: upstream's webhook, its configurations, RBAC
// and cert-manager objects (docs/migration.md).
func guideUpstreamWebhook() []client.Object {
	certManager := func(kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: kind})
		u.SetNamespace("kube-system")
		u.SetName(name)
		return u
	}
	wh := metav1.ObjectMeta{Namespace: "kube-system", Name: "operating-system-manager-webhook"}
	return []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "operatingsystemmanager.k8c.io"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "operatingsystemmanager.k8c.io"}},
		&appsv1.Deployment{ObjectMeta: wh}, &corev1.Service{ObjectMeta: wh}, &corev1.ServiceAccount{ObjectMeta: wh},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: wh.Name}}, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wh.Name}},
		certManager("Certificate", "operating-system-manager-serving-cert"), certManager("Issuer", "operating-system-manager-selfsigned-issuer"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "webhook-server-cert"}},
	}
}

// certManagerCRDs installs stand-ins of cert-manager's Issuer and Certificate CRDs (any content), so that
// upstream's cert-manager objects can exist in the test cluster as they do in an operator's.
func certManagerCRDs(t *testing.T, env *testenv.Env) {
	t.Helper()
	preserve := true
	for _, kind := range []string{"Issuer", "Certificate"} {
		plural := strings.ToLower(kind) + "s"
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".cert-manager.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "cert-manager.io", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}}},
		}
		setCRDSpec(t, env, crd)
	}
	d, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "cert-manager's kinds served", func() error {
		l, err := d.ServerResourcesForGroupVersion("cert-manager.io/v1")
		if err != nil {
			return err
		}
		if len(l.APIResources) < 2 {
			return fmt.Errorf("%d kinds served", len(l.APIResources))
		}
		return nil
	})
}

// guideUpstreamRBAC are the objects the guide's commands delete as upstream's RBAC (docs/migration.md, step 2):
// the ones OSM's deploy/rbac.yaml does not replace under the same name.
func guideUpstreamRBAC() []client.Object {
	return []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "operating-system-manager"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "operating-system-manager"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "operating-system-manager"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "operating-system-manager"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:operating-system-manager"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:operating-system-manager"}},
	}
}

// renderedByOSM says why md's user-data is not OSM's yet, or that upstream's objects for it remain, or that a
// kubelet bootstrap Secret was left that its profile does not use.
func renderedByOSM(ctx context.Context, c client.Client, md *clusterv1alpha1.MachineDeployment) error {
	cur := &osmv1alpha1.OperatingSystemConfig{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: md.Name + "." + md.Namespace + "-config"}, cur); err != nil {
		return fmt.Errorf("OSM's OSC: %w", err)
	}
	if cur.Annotations[osc.AnnotationRenderHash] == "" {
		return fmt.Errorf("OSM's OSC is not rendered yet")
	}
	for _, stage := range []string{"bootstrap", "provisioning"} {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: md.Name + "-" + md.Namespace + "-" + stage + "-config"}, s); err != nil {
			return err
		}
		if s.Annotations[osc.AnnotationRenderHash] != cur.Annotations[osc.AnnotationRenderHash] {
			return fmt.Errorf("%s Secret still upstream's or not current: %v", stage, s.Annotations)
		}
	}
	for _, o := range []client.Object{
		&osmv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Namespace: osmNamespace, Name: osc.UpstreamOSCName(md)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: userDataNS, Name: osc.UpstreamKubeletSecretName(md)}},
	} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			return fmt.Errorf("upstream's %s still there (%w)", o.GetName(), err)
		}
	}
	osp := &osmv1alpha1.OperatingSystemProfile{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: md.Annotations[clusterv1alpha1.AnnotationOSP]}, osp); err != nil {
		return err
	}
	kubelet := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: render.KubeletBootstrapSecretName(md)}, kubelet)
	if osp.Spec.Plugin != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubelet bootstrap Secret %s left, which plugin profile %s does not use (%w)", render.KubeletBootstrapSecretName(md), osp.Name, err)
	}
	return nil
}

// noRefusedWrites fails the test for every WriteFailed event on mds: a write the API server refused (an update
// of an immutable Secret, say).
func noRefusedWrites(t *testing.T, c client.Client, mds []*clusterv1alpha1.MachineDeployment) {
	t.Helper()
	for _, ns := range []string{"kube-system", "team-a"} {
		events := &corev1.EventList{}
		if err := c.List(context.Background(), events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Reason == osmv1alpha1.ReasonWriteFailed || strings.Contains(e.Message, "field is immutable") {
				t.Errorf("refused write: %s %s/%s: %s", e.Reason, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
			}
		}
	}
	if len(mds) == 0 {
		t.Error("no MachineDeployments checked")
	}
}
