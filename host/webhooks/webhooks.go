// Package webhooks holds OSM's admission webhooks: profile validation, OperatingSystemConfig immutability and
// MachineDeployment defaulting. The controller serves them when it has a serving certificate, and
// `osm-controller webhook` serves them alone, as upstream's separate webhook Deployment does.
package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"

	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/validation"
)

// Paths the webhooks are served on; deploy/ and the tests register these.
const (
	PathValidateProfile          = "/validate-operatingsystemprofile"
	PathValidateConfig           = "/validate-operatingsystemconfig"
	PathDefaultMachineDeployment = "/mutate-machinedeployment"
)

// Paths upstream OSM serves the same webhooks on. Its webhook configurations (operating-system-manager-webhook
// Service) route there, so OSM serves them too and an upstream installation works unchanged.
const (
	UpstreamPathValidateProfile          = "/operatingsystemprofile"
	UpstreamPathValidateConfig           = "/operatingsystemconfig"
	UpstreamPathDefaultMachineDeployment = "/mutate-v1alpha1-machinedeployment"
)

// Setup registers the webhooks on mgr's webhook server, on OSM's paths and upstream's. Profile reviews wait at
// most validation.AdmissionPluginWait for a plugin to load unless profiles.PluginWait says otherwise. It also
// loads the plugins of the shipped profiles (profiles.Shipped) in the background at start, and adds the
// readiness check "plugins", which passes once they are loaded or WarmWait has passed.
func Setup(mgr ctrl.Manager, profiles *validation.ProfileValidator) error {
	if profiles.PluginWait == 0 {
		profiles.PluginWait = validation.AdmissionPluginWait
	}
	ospValidator := &ProfileValidator{Validator: profiles}
	mdDefaulter := MachineDeploymentDefaulter{Profiles: mgr.GetAPIReader(), Namespace: profiles.Settings.Namespace}
	if err := ctrl.NewWebhookManagedBy(mgr, &osmv1alpha1.OperatingSystemProfile{}).
		WithValidator(ospValidator).WithValidatorCustomPath(PathValidateProfile).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &osmv1alpha1.OperatingSystemConfig{}).
		WithValidator(ConfigValidator{}).WithValidatorCustomPath(PathValidateConfig).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &clusterv1alpha1.MachineDeployment{}).
		WithDefaulter(mdDefaulter).WithDefaulterCustomPath(PathDefaultMachineDeployment).Complete(); err != nil {
		return err
	}
	server, scheme := mgr.GetWebhookServer(), mgr.GetScheme()
	server.Register(UpstreamPathValidateProfile, admission.WithValidator[*osmv1alpha1.OperatingSystemProfile](scheme, ospValidator))
	server.Register(UpstreamPathValidateConfig, admission.WithValidator[*osmv1alpha1.OperatingSystemConfig](scheme, ConfigValidator{}))
	server.Register(UpstreamPathDefaultMachineDeployment, admission.WithDefaulter[*clusterv1alpha1.MachineDeployment](scheme, mdDefaulter))
	w := &warmup{validator: profiles, log: mgr.GetLogger().WithName("webhooks"), done: make(chan struct{}), started: time.Now()}
	if err := mgr.Add(w); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("plugins", w.check)
}

// WarmWait bounds how long the webhooks report not ready while the shipped profiles' plugins load (see Setup):
// a compile that takes longer (a slow or busy machine) delays no rollout beyond it; reviews that need a plugin
// still loading answer with a warning meanwhile.
const WarmWait = 2 * time.Minute

// warmup loads the shipped profiles' plugins once the manager starts, on every replica.
type warmup struct {
	validator *validation.ProfileValidator
	log       logr.Logger
	done      chan struct{}
	started   time.Time
}

// Start loads the plugins in the background and returns when ctx ends, without waiting for a compile in
// progress, so a shutdown is not held up by one.
func (w *warmup) Start(ctx context.Context) error {
	go func() {
		start := time.Now()
		err := w.validator.Warm(ctx)
		close(w.done)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			w.log.Error(err, "loading the default profiles' plugins for admission; reviews load them when needed")
		default:
			w.log.Info("default profiles' plugins loaded for admission", "seconds", time.Since(start).Seconds())
		}
	}()
	<-ctx.Done()
	return nil
}

func (w *warmup) NeedLeaderElection() bool { return false }

func (w *warmup) check(*http.Request) error {
	select {
	case <-w.done:
		return nil
	default:
	}
	if time.Since(w.started) > WarmWait {
		return nil
	}
	return errors.New("loading the default profiles' plugins")
}

// ProfileValidator rejects profiles that cannot render, and spec changes without a version bump.
type ProfileValidator struct {
	Validator *validation.ProfileValidator
}

var profileKind = osmv1alpha1.GroupVersion.WithKind("OperatingSystemProfile").GroupKind()

// ValidateCreate reviews a new profile. A review that would wait longer than the validator's PluginWait for the
// profile's plugin to load answers without the checks that need it, with a warning naming them (see
// validation.ProfileValidator.Review).
func (v *ProfileValidator) ValidateCreate(ctx context.Context, osp *osmv1alpha1.OperatingSystemProfile) (admission.Warnings, error) {
	errs, warnings := v.Validator.Review(ctx, osp)
	return append(validation.Warnings(osp), warnings...), invalid(profileKind, osp.Name, errs)
}

func (v *ProfileValidator) ValidateUpdate(ctx context.Context, oldOSP, newOSP *osmv1alpha1.OperatingSystemProfile) (admission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(oldOSP.Spec, newOSP.Spec) {
		return nil, nil // metadata or status only
	}
	errs := validation.ValidateUpdate(oldOSP, newOSP)
	rerrs, warnings := v.Validator.Review(ctx, newOSP)
	return append(validation.Warnings(newOSP), warnings...), invalid(profileKind, newOSP.Name, append(errs, rerrs...))
}

func (v *ProfileValidator) ValidateDelete(context.Context, *osmv1alpha1.OperatingSystemProfile) (admission.Warnings, error) {
	return nil, nil
}

// ConfigValidator keeps an OperatingSystemConfig's spec immutable, as upstream does: a rendered configuration is
// a record of what machines were given, and OSM replaces it as a whole when it renders again.
type ConfigValidator struct{}

func (ConfigValidator) ValidateCreate(context.Context, *osmv1alpha1.OperatingSystemConfig) (admission.Warnings, error) {
	return nil, nil
}

func (ConfigValidator) ValidateUpdate(_ context.Context, oldOSC, newOSC *osmv1alpha1.OperatingSystemConfig) (admission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(oldOSC.Spec, newOSC.Spec) {
		return nil, nil
	}
	return nil, invalid(osmv1alpha1.GroupVersion.WithKind("OperatingSystemConfig").GroupKind(), newOSC.Name, field.ErrorList{
		field.Forbidden(field.NewPath("spec"), "an OperatingSystemConfig is immutable; change the profile or the MachineDeployment and OSM renders a new one"),
	})
}

func (ConfigValidator) ValidateDelete(context.Context, *osmv1alpha1.OperatingSystemConfig) (admission.Warnings, error) {
	return nil, nil
}

// MachineDeploymentDefaulter names the default profile of a MachineDeployment's OS when it names none, and
// refuses a MachineDeployment that names a profile of another namespace it may not use (render.ProfileAllowed,
// docs/security.md "Tenancy").
type MachineDeploymentDefaulter struct {
	// Profiles reads the profile a MachineDeployment names in a namespace other than its own and the
	// controller's (past the cache: only such references cost a read). Without it, nothing is refused.
	Profiles client.Reader
	// Namespace is the controller's namespace (-namespace), where the default profiles live.
	Namespace string
}

func (d MachineDeploymentDefaulter) Default(ctx context.Context, md *clusterv1alpha1.MachineDeployment) error {
	if err := d.checkTenancy(ctx, md); err != nil {
		return err
	}
	if md.Annotations[clusterv1alpha1.AnnotationOSP] != "" {
		return nil
	}
	v := md.Spec.Template.Spec.ProviderSpec.Value
	if v == nil || len(v.Raw) == 0 {
		return nil
	}
	var pc struct {
		OperatingSystem string `json:"operatingSystem"`
	}
	if err := json.Unmarshal(v.Raw, &pc); err != nil || pc.OperatingSystem == "" {
		return nil // machine-controller's own webhook reports a broken provider spec
	}
	if md.Annotations == nil {
		md.Annotations = map[string]string{}
	}
	md.Annotations[clusterv1alpha1.AnnotationOSP] = fmt.Sprintf("osp-%s", pc.OperatingSystem)
	return nil
}

// checkTenancy refuses a MachineDeployment whose k8c.io/operating-system-profile-namespace names another
// namespace than its own and the controller's, when the profile there exists and does not allow the
// MachineDeployment's namespace. A profile that does not exist yet is left to the controller, which reports
// ProfileNotFound and, once it exists, ProfileNotAllowed unless it allows the namespace.
//
// Only a new reference is checked: an update that keeps the profile reference passes. What admission guards
// is the choice of a profile; once a MachineDeployment holds a reference, the controller checks it at every
// reconcile and reports ProfileNotAllowed. Checking it again here refused the controller's own finalizer
// patch on a MachineDeployment created before its profile (so its status was never written), and would
// refuse scaling, and the finalizer's removal on deletion, of every MachineDeployment whose profile has
// since stopped allowing its namespace.
func (d MachineDeploymentDefaulter) checkTenancy(ctx context.Context, md *clusterv1alpha1.MachineDeployment) error {
	name := md.Annotations[clusterv1alpha1.AnnotationOSP]
	ns := md.Annotations[clusterv1alpha1.AnnotationOSPNamespace]
	if d.Profiles == nil || name == "" || ns == "" || ns == md.Namespace || ns == d.Namespace || keepsReference(ctx, name, ns) {
		return nil
	}
	osp := &osmv1alpha1.OperatingSystemProfile{}
	switch err := d.Profiles.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, osp); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading OperatingSystemProfile %s/%s to check that namespace %s may use it: %w", ns, name, md.Namespace, err)
	}
	if err := render.ProfileAllowed(osp, md.Namespace, d.Namespace); err != nil {
		return apierrors.NewForbidden(schema.GroupResource{Group: "cluster.k8s.io", Resource: "machinedeployments"}, md.Name,
			fmt.Errorf("annotation %s: %w (reason %s)", clusterv1alpha1.AnnotationOSPNamespace, errors.Unwrap(err), osmv1alpha1.ReasonProfileNotAllowed))
	}
	return nil
}

// keepsReference reports whether the admission request in ctx is an update of a MachineDeployment that named
// profile ns/name before it.
func keepsReference(ctx context.Context, name, ns string) bool {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.Operation != admissionv1.Update {
		return false
	}
	var old struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return false
	}
	a := old.Metadata.Annotations
	return a[clusterv1alpha1.AnnotationOSP] == name && a[clusterv1alpha1.AnnotationOSPNamespace] == ns
}

func invalid(kind schema.GroupKind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(kind, name, errs)
}
