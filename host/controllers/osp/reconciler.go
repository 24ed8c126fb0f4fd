// Package osp is the OperatingSystemProfile controller. It keeps the default profiles installed and current,
// resolves every profile's plugin, and reports in each profile's status whether it can render.
package osp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/validation"
	"github.com/osmhq/osm/sdk/abi"
)

// LabelDefault marks the profiles OSM installs; only those are updated when a newer one ships.
const LabelDefault = "osm.k8c.io/default-profile"

// Reconciler reconciles OperatingSystemProfiles.
type Reconciler struct {
	Client   client.Client
	Plugins  render.PluginSource
	Recorder record.EventRecorder
	// Namespace is where default profiles live (-namespace).
	Namespace string
	// Defaults are the profiles shipped with this build; nil with -disable-default-osps.
	Defaults []*osmv1alpha1.OperatingSystemProfile
}

// Reconcile resolves a profile's plugin and reports the result; for a default profile that is missing or older
// than the shipped one, it installs the shipped one first.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("profile", klog.KRef(req.Namespace, req.Name))
	ctx = logr.NewContext(ctx, log)
	if err := r.installDefault(ctx, req); err != nil {
		return ctrl.Result{}, err
	}
	osp := &osmv1alpha1.OperatingSystemProfile{}
	if err := r.Client.Get(ctx, req.NamespacedName, osp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !osp.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := osp.Status.DeepCopy()
	r.resolve(ctx, osp)
	osp.Status.ObservedGeneration = osp.Generation
	var result ctrl.Result
	if r.notLoadedYet(ctx, osp) {
		// Admission may have answered without the plugin (it was still loading): look again once the module
		// is loaded in this process, to report whether it supports the profile.
		result.RequeueAfter = metadataRecheck
	}
	if apiequality.Semantic.DeepEqual(before, &osp.Status) {
		return result, nil
	}
	return result, client.IgnoreNotFound(r.Client.Status().Update(ctx, osp))
}

// metadataRecheck is how often a profile whose built-in plugin has not been loaded yet is looked at again.
const metadataRecheck = time.Minute

// notLoadedYet reports whether osp names a built-in plugin that resolved but whose metadata is not known yet.
func (r *Reconciler) notLoadedYet(ctx context.Context, osp *osmv1alpha1.OperatingSystemProfile) bool {
	if osp.Spec.Plugin == nil || osp.Spec.Plugin.Builtin == "" || osp.Status.Plugin == nil {
		return false
	}
	if _, ok := r.Plugins.(render.PluginIdentifier); !ok {
		return false
	}
	_, md, err := r.identify(ctx, osp)
	return err == nil && md == nil
}

// resolve sets the plugin and the conditions in osp.Status.
func (r *Reconciler) resolve(ctx context.Context, osp *osmv1alpha1.OperatingSystemProfile) {
	gen := osp.Generation
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&osp.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	if errs := (&validation.ProfileValidator{}).ValidateStructure(osp); len(errs) > 0 {
		msg := errs.ToAggregate().Error()
		set(osmv1alpha1.ConditionReady, metav1.ConditionFalse, osmv1alpha1.ReasonTemplateError, msg)
		r.Recorder.Event(osp, "Warning", osmv1alpha1.ReasonTemplateError, msg)
		return
	}
	if osp.Spec.Plugin == nil {
		osp.Status.Plugin = nil
		meta.RemoveStatusCondition(&osp.Status.Conditions, osmv1alpha1.ConditionPluginResolved)
		set(osmv1alpha1.ConditionReady, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "templates-only profile")
		return
	}
	id, md, err := r.identify(ctx, osp)
	if err != nil {
		reason := render.Reason(err)
		msg := strings.Join(strings.Fields(err.Error()), " ")
		set(osmv1alpha1.ConditionPluginResolved, metav1.ConditionFalse, reason, msg)
		set(osmv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
		r.Recorder.Event(osp, corev1.EventTypeWarning, reason, msg)
		return
	}
	osp.Status.Plugin = &id
	if md == nil {
		// Not loaded yet: admission checked the plugin supports the profile unless it answered while the plugin
		// was still loading (then Reconcile looks again, see notLoadedYet); the first render loads it.
		set(osmv1alpha1.ConditionPluginResolved, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, fmt.Sprintf("plugin %s resolved to %s", id.Name, id.Digest))
		set(osmv1alpha1.ConditionReady, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "profile can render")
		return
	}
	if !md.SupportsOS(string(osp.Spec.OSName), osp.Spec.OSVersion) {
		msg := fmt.Sprintf("plugin %q does not support %s %s", md.Name, osp.Spec.OSName, osp.Spec.OSVersion)
		set(osmv1alpha1.ConditionPluginResolved, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "resolved to "+id.Digest)
		set(osmv1alpha1.ConditionReady, metav1.ConditionFalse, osmv1alpha1.ReasonUnsupported, msg)
		return
	}
	set(osmv1alpha1.ConditionPluginResolved, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, fmt.Sprintf("plugin %s %s resolved to %s", md.Name, md.Version, id.Digest))
	set(osmv1alpha1.ConditionReady, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "profile can render")
}

// identify names the profile's plugin without loading it when the source can (render.PluginIdentifier):
// resolving a profile for its status must not compile its plugin. The metadata is nil when not known yet.
func (r *Reconciler) identify(ctx context.Context, osp *osmv1alpha1.OperatingSystemProfile) (osmv1alpha1.ResolvedPlugin, *abi.Metadata, error) {
	if ider, ok := r.Plugins.(render.PluginIdentifier); ok {
		return ider.Identify(ctx, osp.Namespace, osp.Spec.Plugin)
	}
	p, err := r.Plugins.Resolve(ctx, osp.Namespace, osp.Spec.Plugin)
	if err != nil {
		return osmv1alpha1.ResolvedPlugin{}, nil, err
	}
	md := p.Metadata()
	return p.Identity(), &md, nil
}

// installDefault creates a shipped profile that is missing, and replaces one that is older than the shipped
// version when it is a default profile: OSM's (LabelDefault) or upstream OSM's (UpstreamDefault). A profile with
// a newer or equal version is left alone (operators may have adopted and changed it), and so is an operator's
// own profile under a default's name.
func (r *Reconciler) installDefault(ctx context.Context, req ctrl.Request) error {
	if req.Namespace != r.Namespace {
		return nil
	}
	var shipped *osmv1alpha1.OperatingSystemProfile
	for _, d := range r.Defaults {
		if d.Name == req.Name {
			shipped = d
		}
	}
	if shipped == nil {
		return nil
	}
	current := &osmv1alpha1.OperatingSystemProfile{}
	err := r.Client.Get(ctx, req.NamespacedName, current)
	if apierrors.IsNotFound(err) {
		osp := shipped.DeepCopy()
		osp.Namespace = r.Namespace
		metav1.SetMetaDataLabel(&osp.ObjectMeta, LabelDefault, "true")
		if err := r.Client.Create(ctx, osp); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("installing default profile %s: %w", osp.Name, err)
		}
		logr.FromContextOrDiscard(ctx).Info("installed default profile", "version", osp.Spec.Version)
		return nil
	}
	if err != nil || !current.DeletionTimestamp.IsZero() {
		return err
	}
	upstream := UpstreamDefault(current)
	if current.Labels[LabelDefault] != "true" && !upstream {
		// The operator's own profile under a default's name: never replaced.
		return nil
	}
	have, err1 := semver.NewVersion(current.Spec.Version)
	want, err2 := semver.NewVersion(shipped.Spec.Version)
	if err1 != nil || err2 != nil || !want.GreaterThan(have) {
		return nil
	}
	oldVersion := current.Spec.Version
	allowed := current.Spec.AllowedNamespaces // the operator's tenancy choice (docs/security.md) survives upgrades
	current.Spec = *shipped.Spec.DeepCopy()
	current.Spec.AllowedNamespaces = allowed
	metav1.SetMetaDataLabel(&current.ObjectMeta, LabelDefault, "true")
	if err := r.Client.Update(ctx, current); err != nil {
		return fmt.Errorf("upgrading default profile %s: %w", current.Name, err)
	}
	if upstream {
		logr.FromContextOrDiscard(ctx).Info("took over upstream OSM's default profile", "profile", current.Name, "from", oldVersion, "to", shipped.Spec.Version)
		r.Recorder.Eventf(current, "Normal", "DefaultProfileTakenOver", "upstream OSM's default profile %s replaced by OSM's %s", oldVersion, shipped.Spec.Version)
		return nil
	}
	r.Recorder.Eventf(current, "Normal", "DefaultProfileUpgraded", "upgraded from %s to %s", oldVersion, shipped.Spec.Version)
	return nil
}

// upstreamDefaultNames are the default profiles upstream OSM v1.x installs (osp-centos and osp-sles until v1.8).
var upstreamDefaultNames = map[string]bool{
	"osp-amzn2": true, "osp-centos": true, "osp-flatcar": true, "osp-flatcar-cloud-init": true, "osp-rhel": true,
	"osp-rockylinux": true, "osp-sles": true, "osp-ubuntu": true,
}

// UpstreamDefault reports whether osp carries the identity of a default profile upstream OSM installed: one of
// its names, templates only (no plugin), at a v1 version (upstream stamps its release version, v1.0.0 to v1.11.x,
// on them and rewrites the spec whenever that differs, so no operator could have changed one under upstream),
// and without OSM's default label. Only those and OSM's own defaults are replaced when a newer one ships; the
// default profiles OSM ships are at v2 so that they are newer than every upstream release's.
func UpstreamDefault(osp *osmv1alpha1.OperatingSystemProfile) bool {
	if osp.Labels[LabelDefault] != "" || osp.Spec.Plugin != nil || len(osp.Spec.Plugins) > 0 || !upstreamDefaultNames[osp.Name] {
		return false
	}
	v, err := semver.NewVersion(osp.Spec.Version)
	return err == nil && v.Major() == 1
}

// TakesOver returns whether installDefault would replace a profile as upstream OSM's default profile, given
// the shipped defaults (nil with -disable-default-osps) and -namespace: the OSC controller holds such a
// profile's MachineDeployments until it is replaced, rather than render the profile about to go.
func TakesOver(defaults []*osmv1alpha1.OperatingSystemProfile, namespace string) func(*osmv1alpha1.OperatingSystemProfile) bool {
	shipped := map[string]*semver.Version{}
	for _, d := range defaults {
		if v, err := semver.NewVersion(d.Spec.Version); err == nil {
			shipped[d.Name] = v
		}
	}
	return func(osp *osmv1alpha1.OperatingSystemProfile) bool {
		want, ok := shipped[osp.Name]
		if !ok || osp.Namespace != namespace || !osp.DeletionTimestamp.IsZero() || !UpstreamDefault(osp) {
			return false
		}
		have, err := semver.NewVersion(osp.Spec.Version)
		return err == nil && want.GreaterThan(have)
	}
}

// InstallDefaults installs or upgrades every default profile; the controller runs it once at start, after
// which deletions and edits are reconciled one by one. A profile that cannot be installed yet (the API server
// or the admission webhook not answering, as while the controller's own webhook server starts) is retried
// with backoff (1 s doubling to 30 s), each failure logged, until all are installed or ctx ends; it returns
// the last failure if ctx ended first. Admission answers the default profiles without loading a plugin
// (validation.ProfileValidator.Shipped), so a cold plugin cache does not hold the install up.
func (r *Reconciler) InstallDefaults(ctx context.Context) error {
	pending := make([]string, 0, len(r.Defaults))
	for _, d := range r.Defaults {
		pending = append(pending, d.Name)
	}
	delay := time.Second
	for {
		var failed []string
		var last error
		for _, name := range pending {
			if err := r.installDefault(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: r.Namespace, Name: name}}); err != nil {
				failed, last = append(failed, name), err
			}
		}
		if len(failed) == 0 {
			return nil
		}
		logr.FromContextOrDiscard(ctx).Info("installing default profiles: retrying", "profiles", failed, "in", delay.String(), "error", last.Error())
		select {
		case <-ctx.Done():
			return last
		case <-time.After(delay):
		}
		pending, delay = failed, min(2*delay, 30*time.Second)
	}
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("operatingsystemprofile").
		For(&osmv1alpha1.OperatingSystemProfile{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}
