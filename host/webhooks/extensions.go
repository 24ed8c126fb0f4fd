package webhooks

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/validation"
)

// PathValidateExtension is where the OperatingSystemProfileExtension webhook is served.
const PathValidateExtension = "/validate-operatingsystemprofileextension"

// SetupExtensions registers the extension webhook. reader lists the profiles and the other extensions of an
// extension's namespace for the trial render. Reviews wait at most validation.AdmissionPluginWait for plugins
// to load unless v.PluginWait says otherwise.
func SetupExtensions(mgr ctrl.Manager, reader client.Reader, v *validation.ExtensionValidator) error {
	if v.PluginWait == 0 {
		v.PluginWait = validation.AdmissionPluginWait
	}
	return ctrl.NewWebhookManagedBy(mgr, &osmv1alpha1.OperatingSystemProfileExtension{}).
		WithValidator(&ExtensionValidator{Reader: reader, Validator: v}).WithValidatorCustomPath(PathValidateExtension).Complete()
}

// ExtensionValidator rejects extensions that do not render with the profiles they select, or that conflict with
// another extension there.
type ExtensionValidator struct {
	Reader    client.Reader
	Validator *validation.ExtensionValidator
}

var extensionKind = osmv1alpha1.GroupVersion.WithKind("OperatingSystemProfileExtension").GroupKind()

func (v *ExtensionValidator) ValidateCreate(ctx context.Context, x *osmv1alpha1.OperatingSystemProfileExtension) (admission.Warnings, error) {
	return v.validate(ctx, x)
}

func (v *ExtensionValidator) ValidateUpdate(ctx context.Context, oldX, newX *osmv1alpha1.OperatingSystemProfileExtension) (admission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(oldX.Spec, newX.Spec) {
		return nil, nil // metadata or status only
	}
	return v.validate(ctx, newX)
}

func (v *ExtensionValidator) ValidateDelete(context.Context, *osmv1alpha1.OperatingSystemProfileExtension) (admission.Warnings, error) {
	return nil, nil
}

func (v *ExtensionValidator) validate(ctx context.Context, x *osmv1alpha1.OperatingSystemProfileExtension) (admission.Warnings, error) {
	profiles := &osmv1alpha1.OperatingSystemProfileList{}
	if err := v.Reader.List(ctx, profiles, client.InNamespace(x.Namespace)); err != nil {
		return nil, err
	}
	others := &osmv1alpha1.OperatingSystemProfileExtensionList{}
	if err := v.Reader.List(ctx, others, client.InNamespace(x.Namespace)); err != nil {
		return nil, err
	}
	errs, warnings := v.Validator.Review(ctx, x, profiles.Items, others.Items)
	return warnings, invalid(extensionKind, x.Name, errs)
}
