package osc_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
)

// finalizerFixture starts a control plane with a MachineDeployment naming profile, and a reconciler whose
// worker cache can be made stale (see staleReads). Profile "osp-template" exists: a templates-only profile.
func finalizerFixture(t *testing.T, profile string) (context.Context, client.Client, *staleReads, *osc.Reconciler, *clusterv1alpha1.MachineDeployment) {
	_, ctx, c, stale, r, md := finalizerFixtureEnv(t, profile)
	return ctx, c, stale, r, md
}

// finalizerFixtureEnv is finalizerFixture with its control plane.
func finalizerFixtureEnv(t *testing.T, profile string) (*testenv.Env, context.Context, client.Client, *staleReads, *osc.Reconciler, *clusterv1alpha1.MachineDeployment) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	c := env.Client
	for _, ns := range []string{"cloud-init-settings", "osm"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	osp := &osmv1alpha1.OperatingSystemProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: "osm", Name: "osp-template"},
		Spec: osmv1alpha1.OperatingSystemProfileSpec{
			OSName: "ubuntu", OSVersion: "24.04", Version: "v1.0.0", SupportedCloudProviders: []osmv1alpha1.CloudProviderSpec{{Name: "aws"}},
			BootstrapConfig: osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{{Path: "/opt/bin/fetch",
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "#!/bin/sh\ncurl -H 'Authorization: Bearer {{ .Token }}' {{ .ServerURL }}\n"}}}}},
			ProvisioningConfig: osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{{Path: "/etc/kubernetes/bootstrap-kubelet.conf",
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "{{ .BootstrapKubeconfig }}"}}}}},
		},
	}
	if err := c.Create(ctx, osp); err != nil {
		t.Fatal(err)
	}
	pc, _ := json.Marshal(map[string]any{"cloudProvider": "aws", "operatingSystem": "ubuntu", "cloudProviderSpec": map[string]any{}})
	md := &clusterv1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "workers",
			Annotations: map[string]string{clusterv1alpha1.AnnotationOSP: profile, clusterv1alpha1.AnnotationRevision: "1"}},
		Spec: clusterv1alpha1.MachineDeploymentSpec{Template: clusterv1alpha1.MachineTemplateSpec{Spec: clusterv1alpha1.MachineSpec{
			ProviderSpec: clusterv1alpha1.ProviderSpec{Value: &runtime.RawExtension{Raw: pc}},
			Versions:     clusterv1alpha1.MachineVersionInfo{Kubelet: "1.33.2"},
		}}},
	}
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	stale := &staleReads{Client: c}
	settings := render.DefaultSettings()
	settings.Namespace = "osm"
	r := &osc.Reconciler{
		Mgmt: c, Worker: stale, Renderer: &render.Renderer{},
		Issuer:   &credentials.Issuer{Client: c, Namespace: "cloud-init-settings"},
		Settings: settings, Recorder: record.NewFakeRecorder(100), StalledRetry: time.Hour,
		ClusterInfo: func(context.Context) (render.ClusterInfo, error) {
			return render.ClusterInfo{ServerURL: "https://api", CACert: "ca"}, nil
		},
		RegistryAuth: func(context.Context) (string, error) { return "", nil },
	}
	return env, ctx, c, stale, r, md
}

// staleReads serves one read of a MachineDeployment from a snapshot taken earlier, as an informer cache that
// has not yet seen another controller's write does; everything else goes to the real API server.
type staleReads struct {
	client.Client
	snapshot *clusterv1alpha1.MachineDeployment
}

func (s *staleReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if md, ok := obj.(*clusterv1alpha1.MachineDeployment); ok && s.snapshot != nil && key == client.ObjectKeyFromObject(s.snapshot) {
		s.snapshot.DeepCopyInto(md)
		s.snapshot = nil
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// TestFinalizerKeepsOtherControllersFinalizers replays the lost-finalizer race against the real API server:
// another controller adds (and later a third adds) its finalizer to a MachineDeployment after OSM's cache last
// saw it. OSM adding and removing its own finalizer must keep theirs.
func TestFinalizerKeepsOtherControllersFinalizers(t *testing.T) {
	ctx, c, stale, r, md := finalizerFixture(t, "osp-missing")
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(md)}
	// addFinalizer makes another controller add its finalizer after OSM's cache took the snapshot.
	addFinalizer := func(name string) {
		t.Helper()
		snapshot := &clusterv1alpha1.MachineDeployment{}
		if err := c.Get(ctx, req.NamespacedName, snapshot); err != nil {
			t.Fatal(err)
		}
		stale.snapshot = snapshot
		fresh := snapshot.DeepCopy()
		fresh.Finalizers = append(fresh.Finalizers, name)
		if err := c.Update(ctx, fresh); err != nil {
			t.Fatal(err)
		}
	}
	reconcileUntil := func(what string, done func([]string) bool) []string {
		t.Helper()
		got := &clusterv1alpha1.MachineDeployment{}
		for range 5 {
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if err := c.Get(ctx, req.NamespacedName, got); err != nil {
				t.Fatal(err)
			}
			if done(got.Finalizers) {
				return got.Finalizers
			}
		}
		t.Fatalf("%s: finalizers are %v", what, got.Finalizers)
		return nil
	}

	addFinalizer("example.com/other")
	reconcileUntil("adding ours keeps the other", func(f []string) bool {
		return slices.Contains(f, osc.Finalizer) && slices.Contains(f, "example.com/other")
	})

	// The MachineDeployment stops naming a profile: OSM cleans up and removes its finalizer, while a third
	// controller adds one its cache had not seen.
	current := &clusterv1alpha1.MachineDeployment{}
	if err := c.Get(ctx, req.NamespacedName, current); err != nil {
		t.Fatal(err)
	}
	delete(current.Annotations, clusterv1alpha1.AnnotationOSP)
	if err := c.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	addFinalizer("example.com/third")
	final := reconcileUntil("removing ours keeps the others", func(f []string) bool { return !slices.Contains(f, osc.Finalizer) })
	if !slices.Contains(final, "example.com/other") || !slices.Contains(final, "example.com/third") {
		t.Errorf("finalizers after OSM removed its own: %v, want example.com/other and example.com/third", final)
	}
}

// TestNoCredentialsWithoutFinalizer: the credentials are issued once the finalizer is in place, since nothing
// would remove them if the MachineDeployment went away without it. When adding it fails (here: another
// controller's write the cache had not seen), none is issued, and the reconcile is requeued at once; the next
// attempt adds the finalizer and issues them.
func TestNoCredentialsWithoutFinalizer(t *testing.T) {
	ctx, c, stale, r, md := finalizerFixture(t, "osp-template")
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(md)}
	snapshot := &clusterv1alpha1.MachineDeployment{}
	if err := c.Get(ctx, req.NamespacedName, snapshot); err != nil {
		t.Fatal(err)
	}
	stale.snapshot = snapshot
	fresh := snapshot.DeepCopy()
	fresh.Labels = map[string]string{"touched": "by-another-controller"}
	if err := c.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("reconcile with a stale MachineDeployment: %+v, %v; want a quick retry", res, err)
	}
	credentialsLeft := func() int {
		n := 0
		for _, l := range []struct {
			list client.ObjectList
			ns   string
		}{{&corev1.SecretList{}, "kube-system"}, {&rbacv1.RoleList{}, "cloud-init-settings"}, {&rbacv1.RoleBindingList{}, "cloud-init-settings"}} {
			if err := c.List(ctx, l.list, client.InNamespace(l.ns), credentials.Selector(md)); err != nil {
				t.Fatal(err)
			}
			n += meta.LenList(l.list)
		}
		return n
	}
	if n := credentialsLeft(); n != 0 {
		t.Errorf("%d credential objects left after the finalizer could not be added, want none", n)
	}

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &clusterv1alpha1.MachineDeployment{}
	if err := c.Get(ctx, req.NamespacedName, got); err != nil || !slices.Contains(got.Finalizers, osc.Finalizer) {
		t.Fatalf("the next attempt did not add the finalizer: %v %v", got.Finalizers, err)
	}
	if n := credentialsLeft(); n != 3 {
		t.Errorf("%d credential objects after the next attempt, want 3 (bootstrap token, Role, RoleBinding)", n)
	}
	boot := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "cloud-init-settings", Name: render.BootstrapSecretName(md)}, boot); err != nil {
		t.Fatalf("no bootstrap Secret after the next attempt: %v", err)
	}
}

// unseenOSCs is a cache that has not yet seen any OperatingSystemConfig: it catches up, if ever, after
// catchUp.after reads of one.
type unseenOSCs struct {
	client.Client
	catchUp *cacheCatchUp
}

// cacheCatchUp counts the reads of an unseenOSCs cache: the first after miss, the ones after show.
type cacheCatchUp struct {
	after        int32
	reads, shown atomic.Int32
}

func (u unseenOSCs) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	_, typed := obj.(*osmv1alpha1.OperatingSystemConfig)
	if m, ok := obj.(*metav1.PartialObjectMetadata); typed || ok && m.Kind == "OperatingSystemConfig" {
		if u.catchUp == nil || u.catchUp.reads.Add(1) <= u.catchUp.after {
			return apierrors.NewNotFound(osmv1alpha1.GroupVersion.WithResource("operatingsystemconfigs").GroupResource(), key.Name)
		}
		u.catchUp.shown.Add(1)
	}
	return u.Client.Get(ctx, key, obj, opts...)
}

// TestAPlaceholderTheCacheHasNotSeenIsReplacedOnceItHas: a reconcile that failed left a placeholder OSC, which
// the next reconcile's cache does not show. Its create meets the placeholder (AlreadyExists): that reconcile
// reports nothing and is requeued at once; the one after waits for its cache to show the placeholder
// (awaitPrevious) and replaces it. The cache hides the placeholder from more reads than a reconcile makes, so
// only a reconcile that waited for it replaces it.
func TestAPlaceholderTheCacheHasNotSeenIsReplacedOnceItHas(t *testing.T) {
	ctx, c, _, r, md := finalizerFixture(t, "osp-template")
	placeholder := &osmv1alpha1.OperatingSystemConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "osm", Name: render.OSCName(md)},
		Spec:       osmv1alpha1.OperatingSystemConfigSpec{OSName: "ubuntu", CloudProvider: osmv1alpha1.CloudProviderSpec{Name: "aws"}},
	}
	credentials.Mark(md, placeholder)
	if err := c.Create(ctx, placeholder); err != nil {
		t.Fatal(err)
	}
	catchUp := &cacheCatchUp{after: 10}
	r.Mgmt, r.MgmtAPIReader = unseenOSCs{Client: c, catchUp: catchUp}, c
	recorder := record.NewFakeRecorder(10)
	r.Recorder = recorder
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(md)}
	res, err := r.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("reconcile on a cache without the placeholder: %+v, %v; want a requeue", res, err)
	}
	if n := catchUp.reads.Load(); n >= catchUp.after {
		t.Fatalf("the first reconcile read the OSC %d times: the cache must hide it from more reads than that", n)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &osmv1alpha1.OperatingSystemConfig{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(placeholder), got); err != nil {
		t.Fatal(err)
	}
	if got.UID == placeholder.UID || got.Annotations[osc.AnnotationRenderHash] == "" || len(got.Spec.ProvisioningConfig.Files) == 0 {
		t.Errorf("the placeholder was not replaced by the rendered OSC (uid %s → %s, annotations %v)", placeholder.UID, got.UID, got.Annotations)
	}
	if ready := meta.FindStatusCondition(got.Status.Conditions, osmv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready condition %+v", ready)
	}
	select {
	case e := <-recorder.Events:
		t.Errorf("event %q for a replaced placeholder", e)
	default:
	}
}

// unseenUserData is a cache that has not yet seen any Secret in the user-data namespace.
type unseenUserData struct{ client.Client }

func (u unseenUserData) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok && key.Namespace == "cloud-init-settings" {
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	return u.Client.Get(ctx, key, obj, opts...)
}

// TestAReconcileOnAStaleCacheWritesNothing: a MachineDeployment is reconciled again after its first reconcile
// wrote everything, on caches that have seen none of it: not the finalizer, not the OSC, not the Secrets (the
// reconciler waits for its caches to show its writes, see TestAReconcileRightAfterOneThatWroteFindsItCurrent;
// this is a cache further behind). Its first write, the finalizer patch computed from the stale
// MachineDeployment, fails as Outdated: nothing else is written, no credential issued or revoked.
func TestAReconcileOnAStaleCacheWritesNothing(t *testing.T) {
	ctx, c, _, r, md := finalizerFixture(t, "osp-template")
	r.MgmtAPIReader = c
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(md)}
	before := &clusterv1alpha1.MachineDeployment{}
	if err := c.Get(ctx, req.NamespacedName, before); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	versions := func() map[string]string {
		v := map[string]string{}
		oscObj := &osmv1alpha1.OperatingSystemConfig{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "osm", Name: render.OSCName(md)}, oscObj); err != nil {
			t.Fatal(err)
		}
		v["osc"] = string(oscObj.UID) + "/" + oscObj.ResourceVersion
		for _, name := range []string{render.BootstrapSecretName(md), render.ProvisioningSecretName(md), render.KubeletBootstrapSecretName(md)} {
			s := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "cloud-init-settings", Name: name}, s); err != nil {
				t.Fatal(err)
			}
			v[name] = string(s.UID) + "/" + s.ResourceVersion
		}
		tokens := &corev1.SecretList{}
		if err := c.List(ctx, tokens, client.InNamespace("kube-system"), credentials.Selector(md)); err != nil {
			t.Fatal(err)
		}
		for _, s := range tokens.Items {
			v["token "+s.Name] = string(s.UID) + "/" + s.ResourceVersion
		}
		return v
	}
	want := versions()

	r.Mgmt = unseenOSCs{Client: c}
	r.Worker = &staleReads{Client: unseenUserData{c}, snapshot: before}
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatalf("reconcile on a stale cache: %v", err)
	}
	if got := versions(); !maps.Equal(got, want) {
		t.Errorf("a reconcile on a stale cache changed what the first one wrote (res %+v):\n got %v\nwant %v", res, got, want)
	}
}

// refusedPatches refuses every patch of a MachineDeployment while refuse is set, as an admission webhook
// refused OSM's finalizer patch.
type refusedPatches struct {
	client.Client
	refuse *atomic.Bool
}

func (r refusedPatches) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*clusterv1alpha1.MachineDeployment); ok && r.refuse.Load() {
		return apierrors.NewForbidden(clusterv1alpha1.GroupVersion.WithResource("machinedeployments").GroupResource(), obj.GetName(), errors.New("refused by a webhook"))
	}
	return r.Client.Patch(ctx, obj, patch, opts...)
}

// TestAFailureThatCannotBeReportedIsRetried: a MachineDeployment naming a profile that does not exist stalls
// until a watched object changes, but why it stalls must reach its placeholder OSC. When writing that fails
// (the finalizer patch before it is refused), the reconcile returns the error, so controller-runtime tries
// again with backoff; it used to return nothing and wait for a change that might never come, with no OSC.
func TestAFailureThatCannotBeReportedIsRetried(t *testing.T) {
	ctx, c, _, r, md := finalizerFixture(t, "osp-missing")
	refuse := &atomic.Bool{}
	refuse.Store(true)
	r.Worker, r.MgmtAPIReader = refusedPatches{Client: c, refuse: refuse}, c
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(md)}
	if res, err := r.Reconcile(ctx, req); err == nil {
		t.Fatalf("reconcile whose report failed: %+v, no error; want one, to be retried", res)
	}
	refuse.Store(false)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &osmv1alpha1.OperatingSystemConfig{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "osm", Name: render.OSCName(md)}, got); err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(got.Status.Conditions, osmv1alpha1.ConditionReady); ready == nil || ready.Reason != osmv1alpha1.ReasonProfileNotFound {
		t.Errorf("Ready condition %+v, want reason %s", ready, osmv1alpha1.ReasonProfileNotFound)
	}
}
