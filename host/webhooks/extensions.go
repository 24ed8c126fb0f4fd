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
// extension's namespace for the trial render.
func SetupExtensions(mgr ctrl.Manager, reader client.Reader, v *validation.ExtensionValidator) error {
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
	return nil, v.validate(ctx, x)
}

func (v *ExtensionValidator) ValidateUpdate(ctx context.Context, oldX, newX *osmv1alpha1.OperatingSystemProfileExtension) (admission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(oldX.Spec, newX.Spec) {
		return nil, nil // metadata or status only
	}
	return nil, v.validate(ctx, newX)
}

func (v *ExtensionValidator) ValidateDelete(context.Context, *osmv1alpha1.OperatingSystemProfileExtension) (admission.Warnings, error) {
	return nil, nil
}

func (v *ExtensionValidator) validate(ctx context.Context, x *osmv1alpha1.OperatingSystemProfileExtension) error {
	profiles := &osmv1alpha1.OperatingSystemProfileList{}
	if err := v.Reader.List(ctx, profiles, client.InNamespace(x.Namespace)); err != nil {
		return err
	}
	others := &osmv1alpha1.OperatingSystemProfileExtensionList{}
	if err := v.Reader.List(ctx, others, client.InNamespace(x.Namespace)); err != nil {
		return err
	}
	return invalid(extensionKind, x.Name, v.Validator.Validate(ctx, x, profiles.Items, others.Items))
}
