// Package osc is the OperatingSystemConfig controller: for every MachineDeployment that names an
// OperatingSystemProfile it renders the profile, writes the OperatingSystemConfig, and writes the bootstrap and
// provisioning Secrets machine-controller hands to new machines, with credentials scoped to that
// MachineDeployment.
package osc

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/internal/failure"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/internal/parallel"
	"github.com/osmhq/osm/host/render"
)

// Names machine-controller and upstream OSM agree on.
const (
	// Finalizer keeps a MachineDeployment until everything created for it is gone.
	Finalizer = "kubermatic.io/cleanup-operating-system-configs"
	// AnnotationRevision on the OSC and Secrets is the MachineDeployment revision they were rendered for;
	// machine-controller waits for the bootstrap Secret's to match before it creates machines.
	AnnotationRevision = "k8c.io/machine-deployment-revision"
	// AnnotationOSPVersion is the profile version rendered.
	AnnotationOSPVersion = "k8c.io/osp-version"
	// AnnotationMDAnnotationsHash is the hash of the MachineDeployment's annotations rendered.
	AnnotationMDAnnotationsHash = "k8c.io/mdannotations-hash"
	// AnnotationRenderHash is OSM's hash of every render input (see inputHash).
	AnnotationRenderHash = "osm.k8c.io/render-hash"
	// KeyProvisioningToken in the bootstrap Secret records the token the user-data hands out (the bootstrap
	// token): a reconcile finding it current knows the token's reader binding was written (issueCredentials).
	KeyProvisioningToken = "provisioning-token"
	// KeyKubeconfig is the key of the kubelet bootstrap kubeconfig Secret.
	KeyKubeconfig = "kubeconfig"
)

// Reconciler reconciles MachineDeployments into OperatingSystemConfigs and user-data Secrets. It holds the
// clients the management/worker split needs: a cached client per cluster, and one reader past the management
// cache for what that cache does not hold.
type Reconciler struct {
	// Mgmt reads profiles and writes OperatingSystemConfigs (the -kubeconfig cluster).
	Mgmt client.Client
	// Worker reads MachineDeployments and writes Secrets (the -worker-cluster-kubeconfig cluster).
	Worker client.Client
	// MgmtAPIReader reads what the management cache does not hold: the Secrets profiles hand their plugins
	// (spec.plugin.secrets), and OSC status (the cache holds OSC metadata only, see OSCMeta).
	MgmtAPIReader client.Reader
	// PluginSecretRetry is how soon a missing plugin Secret is looked for again (DefaultPluginSecretRetry
	// when zero).
	PluginSecretRetry time.Duration
	Renderer          *render.Renderer
	Issuer            *credentials.Issuer
	Settings          render.Settings
	// ClusterInfo returns the API server URL and CA nodes use.
	ClusterInfo func(ctx context.Context) (render.ClusterInfo, error)
	// RegistryAuth returns containerd's registry credential tables (empty when none are configured).
	RegistryAuth func(ctx context.Context) (string, error)
	// Recorder records events on MachineDeployments in the worker cluster.
	Recorder record.EventRecorder
	// Build identifies this controller build; a new build re-renders once (its built-in plugins may differ).
	Build string
	// StalledRetry is how long to wait before retrying a failure a plugin might not repeat (a timeout).
	StalledRetry time.Duration
	// TakesOver reports whether a profile is about to be replaced by one of OSM's default profiles (upstream
	// OSM's default profiles, at start); nil when none are. A MachineDeployment naming such a profile waits for
	// the replacement instead of rendering it (see awaitingTakeover).
	TakesOver func(*osmv1alpha1.OperatingSystemProfile) bool
	// TakeoverPatience is how long MachineDeployments wait for one profile's takeover (DefaultTakeoverPatience
	// when zero).
	TakeoverPatience time.Duration

	settingsHash string
	metrics      *metrics
	// upstreamChecked holds the UIDs of the MachineDeployments whose upstream leftovers are gone (upstream.go).
	upstreamChecked sync.Map
	// kubeletSecretNeeded holds needsKubeletBootstrapSecret's answer by profile UID, for one generation.
	kubeletSecretNeeded sync.Map
	// takeoverSince holds, by profile UID, when a MachineDeployment first waited for that profile's takeover.
	takeoverSince sync.Map
	// pending holds, by MachineDeployment, what its last reconcile's writes must show in the caches before
	// the next reconcile reads them (await.go).
	pending sync.Map
	// deleted holds the deletions the caches saw lately (deletions.go).
	deleted deletions
}

// Reconcile brings one MachineDeployment's configuration up to date: waiting for the caches to show what the
// previous reconcile wrote (await.go), the steps (reconcile), then the one status write (report).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	r.awaitPrevious(ctx, req.NamespacedName)
	md := &clusterv1alpha1.MachineDeployment{}
	if err := r.Worker.Get(ctx, req.NamespacedName, md); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("machinedeployment", klog.KObj(md))
	ctx = logr.NewContext(ctx, log)
	st := &state{md: md}
	defer r.leave(req.NamespacedName, st)

	if !md.DeletionTimestamp.IsZero() || md.Annotations[clusterv1alpha1.AnnotationOSP] == "" {
		return r.policy().Result(r.finalize(ctx, st))
	}
	if md.Annotations[clusterv1alpha1.AnnotationRevision] == "" {
		// machine-controller gives a new MachineDeployment its first revision right after creating it, and
		// waits for user-data of that revision. Rendering before would write every Secret twice (revision ""
		// and then "1"); the annotation change brings the MachineDeployment back here.
		log.V(1).Info("waiting for machine-controller to set the revision", "annotation", clusterv1alpha1.AnnotationRevision)
		return ctrl.Result{}, nil
	}

	if r.awaitingTakeover(ctx, md) {
		return ctrl.Result{RequeueAfter: takeoverRecheck}, nil
	}
	start := time.Now()
	defer func() {
		result, err = r.report(ctx, st, err)
		r.metrics.observe(st, err, time.Since(start))
	}()
	return ctrl.Result{}, r.reconcile(ctx, st)
}

// policy is when the reconciler looks again after a failure (failure.Policy): a Retry after StalledRetry, a
// Wait (a missing plugin Secret) after PluginSecretRetry unless the failure says (a plugin image being pulled).
func (r *Reconciler) policy() failure.Policy {
	wait := r.PluginSecretRetry
	if wait == 0 {
		wait = DefaultPluginSecretRetry
	}
	return failure.Policy{Retry: r.StalledRetry, Wait: wait}
}

// reconcile runs the steps in order. Each reads what the previous ones put into st.
func (r *Reconciler) reconcile(ctx context.Context, st *state) error {
	for _, step := range []func(context.Context, *state) error{
		r.loadProfile,
		r.loadExtensions,
		r.loadCurrent,
		r.loadPluginSecrets,
		r.prepareWrites,
		r.renderIfNeeded,
		r.writeOutputs,
	} {
		if err := step(ctx, st); err != nil {
			return err
		}
		if st.done {
			break
		}
	}
	if err := r.removeUnneededKubeletSecret(ctx, st); err != nil {
		return err
	}
	r.removeUpstreamLeftovers(ctx, st.md)
	return nil
}

// prepareWrites puts the finalizer on the MachineDeployment and then issues its credentials — API round trips
// — while the render, which needs neither, runs. A render depends on the credentials only through the decision
// whether anything must be written at all; when the render hash already shows that something must, rendering
// need not wait: in a profile of 500 new MachineDeployments each reconcile spent ~150 ms rendering (on cores
// shared with the API server) after ~3 round trips it did not depend on. The credentials wait for the
// finalizer: without it nothing would remove them if the MachineDeployment went away.
func (r *Reconciler) prepareWrites(ctx context.Context, st *state) error {
	// The render reads st.md while the patch would write its response into it: patch a copy, and take the
	// finalizer and resourceVersion over once both are done.
	var patched *clusterv1alpha1.MachineDeployment
	err := parallel.Do(func() error {
		if !controllerutil.ContainsFinalizer(st.md, Finalizer) {
			md := st.md.DeepCopy()
			if err := r.patchFinalizers(ctx, st, md, controllerutil.AddFinalizer); err != nil {
				return fmt.Errorf("adding finalizer: %w", err)
			}
			patched = md
		}
		return r.issueCredentials(ctx, st)
	}, func() error {
		if r.renderedCurrent(st) {
			return nil // maybe only a credential changed: renderIfNeeded decides once they are known
		}
		return r.render(ctx, st)
	})
	if patched != nil {
		st.md.Finalizers, st.md.ResourceVersion = patched.Finalizers, patched.ResourceVersion
	}
	return err
}

// patchFinalizers adds or removes our finalizer. The list is written whole, so the patch carries the
// resourceVersion it was computed from: read from a cache that had not yet seen another controller's finalizer
// (or our own), it fails as Outdated instead of dropping that finalizer, and the next reconcile reads again.
func (r *Reconciler) patchFinalizers(ctx context.Context, st *state, md *clusterv1alpha1.MachineDeployment, change func(client.Object, string) bool) error {
	before := versionOf(md)
	patch := client.MergeFromWithOptions(md.DeepCopy(), client.MergeFromWithOptimisticLock{})
	change(md, Finalizer)
	err := r.Worker.Patch(ctx, md, patch)
	st.expect(err, expectation{cache: r.Worker, obj: md.DeepCopy(), before: before, gone: true})
	return err
}

// takeoverRecheck is how soon a MachineDeployment waiting for its profile's takeover looks again, should the
// profile's update (which brings it back through the profile watch) be missed.
const takeoverRecheck = 2 * time.Second

// DefaultTakeoverPatience bounds the wait for one profile's takeover (Reconciler.TakeoverPatience): should the
// profile controller fail to replace it (its update refused, say), its MachineDeployments render from it after
// all rather than never.
const DefaultTakeoverPatience = time.Minute

// awaitingTakeover reports whether md names a profile that TakesOver: upstream OSM's default profile, which the
// profile controller replaces with OSM's within a second of start. Rendering it first would write user-data
// (and a kubelet bootstrap Secret) from the profile about to go, to be replaced right after: twice the writes,
// and a window in which new machines get user-data of neither. Nothing is written while waiting.
func (r *Reconciler) awaitingTakeover(ctx context.Context, md *clusterv1alpha1.MachineDeployment) bool {
	if r.TakesOver == nil {
		return false
	}
	osp := &osmv1alpha1.OperatingSystemProfile{}
	if err := r.Mgmt.Get(ctx, r.profileKey(md), osp); err != nil || !r.TakesOver(osp) {
		return false
	}
	patience := r.TakeoverPatience
	if patience == 0 {
		patience = DefaultTakeoverPatience
	}
	first, _ := r.takeoverSince.LoadOrStore(osp.UID, time.Now())
	if waited := time.Since(first.(time.Time)); waited > patience {
		logr.FromContextOrDiscard(ctx).Info("upstream OSM's default profile was not replaced; rendering it", "profile", klog.KObj(osp), "waited", waited.Round(time.Second).String())
		return false
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("waiting for OSM's default profile to replace upstream OSM's", "profile", klog.KObj(osp))
	return true
}
