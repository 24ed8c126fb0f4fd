package validation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/extension"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/templates"
	"github.com/osmhq/osm/sdk/abi"
)

// maxTrialProfiles bounds the trial renders of one extension's admission: each renders a profile with its
// plugin, and a selector may match every profile of the namespace.
const maxTrialProfiles = 32

// ExtensionValidator validates OperatingSystemProfileExtensions the way ProfileValidator validates profiles:
// structure and templates, plugins that resolve and support the profiles, and a trial render of every profile
// the extension selects, with the other extensions that select it, so that a conflict is reported before any
// machine is affected.
type ExtensionValidator struct {
	// Plugins resolves the extension's and the profiles' plugins.
	Plugins render.PluginSource
	// Settings are the controller's node settings, used for the trial render.
	Settings render.Settings
	// PluginWait bounds how long Review waits for plugins to load, over all the plugins it needs (see
	// ProfileValidator.PluginWait); zero waits as long as the context allows.
	PluginWait time.Duration
}

// ValidateStructure checks what needs neither plugins nor profiles.
func (v *ExtensionValidator) ValidateStructure(x *osmv1alpha1.OperatingSystemProfileExtension) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if sel := x.Spec.Selector.LabelSelector; sel != nil {
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			errs = append(errs, field.Invalid(spec.Child("selector", "labelSelector"), "", err.Error()))
		}
	}
	errs = append(errs, validateExtensionPluginSecrets(x.Spec.Plugins, spec.Child("plugins"))...)
	for _, part := range []struct {
		name string
		cfg  *osmv1alpha1.ExtensionConfig
	}{{"bootstrapConfig", x.Spec.BootstrapConfig}, {"provisioningConfig", x.Spec.ProvisioningConfig}} {
		if part.cfg == nil {
			continue
		}
		p := spec.Child(part.name)
		errs = append(errs, validateSection(asSection(part.cfg), p)...)
		for i, o := range part.cfg.Overrides {
			if o == "" {
				errs = append(errs, field.Required(p.Child("overrides").Index(i), "an override names a file path, a unit or <unit>/<drop-in>"))
			}
		}
	}
	return errs
}

// Validate returns everything wrong with x. profiles are the profiles of x's namespace and others the other
// extensions there (x itself, if listed, is replaced by the version being validated).
func (v *ExtensionValidator) Validate(ctx context.Context, x *osmv1alpha1.OperatingSystemProfileExtension, profiles []osmv1alpha1.OperatingSystemProfile, others []osmv1alpha1.OperatingSystemProfileExtension) field.ErrorList {
	errs, _ := v.Review(ctx, x, profiles, others)
	return errs
}

// Review is Validate with warnings. With PluginWait set, a plugin (the extension's or a selected profile's)
// that has not loaded within it is not waited for: the trial renders that need it are skipped with a warning
// saying so, and the load goes on in the background.
func (v *ExtensionValidator) Review(ctx context.Context, x *osmv1alpha1.OperatingSystemProfileExtension, profiles []osmv1alpha1.OperatingSystemProfile, others []osmv1alpha1.OperatingSystemProfileExtension) (field.ErrorList, []string) {
	errs := v.ValidateStructure(x)
	src := v.Plugins
	if src != nil && v.PluginWait > 0 {
		src = newBounded(src, v.PluginWait)
	}
	var warnings []string
	for i := range x.Spec.Plugins {
		p := field.NewPath("spec", "plugins").Index(i)
		if src == nil {
			errs = append(errs, field.Invalid(p, x.Spec.Plugins[i], "no plugin source is configured"))
			continue
		}
		_, err := src.Resolve(ctx, x.Namespace, &x.Spec.Plugins[i])
		var loading *PluginLoadingError
		switch {
		case errors.As(err, &loading):
			warnings = append(warnings, loading.warning(p.String()))
		case err != nil:
			errs = append(errs, field.Invalid(p, pluginRef(&x.Spec.Plugins[i]), err.Error()))
		}
	}
	if len(errs) > 0 || len(warnings) > 0 {
		return errs, warnings
	}
	all := slices.DeleteFunc(slices.Clone(others), func(o osmv1alpha1.OperatingSystemProfileExtension) bool {
		return o.Name == x.Name && o.Namespace == x.Namespace
	})
	all = append(all, *x)
	tried := 0
	for i := range profiles {
		osp := &profiles[i]
		if ok, _ := extension.SelectsProfile(x.Spec.Selector, osp); !ok || osp.Namespace != x.Namespace {
			continue
		}
		if tried++; tried > maxTrialProfiles {
			break
		}
		terrs, loading := v.trial(ctx, src, x, osp, all)
		if loading != nil {
			// Every further trial would wait for the same bound that has passed.
			return errs, append(warnings, loading.warning("spec (trial render with profile "+osp.Name+")"))
		}
		errs = append(errs, terrs...)
	}
	return errs, warnings
}

// trial renders osp for a sample machine of each provider the extension applies to, with every extension that
// applies there, and reports the failures that involve x.
// A plugin still loading after a bounded source's wait ends the trial with loading set.
func (v *ExtensionValidator) trial(ctx context.Context, src render.PluginSource, x *osmv1alpha1.OperatingSystemProfileExtension, osp *osmv1alpha1.OperatingSystemProfile, all []osmv1alpha1.OperatingSystemProfileExtension) (field.ErrorList, *PluginLoadingError) {
	settings := v.Settings
	if settings.ContainerRuntime == "" {
		settings = render.DefaultSettings()
	}
	renderer := &render.Renderer{Plugins: src}
	spec := field.NewPath("spec")
	for _, cp := range osp.Spec.SupportedCloudProviders {
		xs, err := extension.For(osp, cp.Name, all)
		if err != nil {
			return field.ErrorList{field.Invalid(spec.Child("selector"), "", err.Error())}, nil
		}
		if !slices.ContainsFunc(xs, func(o *osmv1alpha1.OperatingSystemProfileExtension) bool { return o.Name == x.Name }) {
			continue
		}
		md := trialMachineDeployment(string(osp.Spec.OSName), cp.Name, osp.Name)
		out, err := renderer.Render(ctx, render.Input{MachineDeployment: md, Profile: osp, Settings: settings, Extensions: xs,
			Cluster: render.ClusterInfo{ServerURL: "https://trial.invalid:6443", CACert: trialCA}})
		if err == nil {
			for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
				if _, err = out.UserData(ctx, stage, render.SecretValues{Plugin: render.PluginSecretPlaceholders(osp)}); err != nil {
					break
				}
			}
		}
		if err == nil {
			continue
		}
		var conflict *extension.ConflictError
		var fe *templates.FieldError
		var loading *PluginLoadingError
		switch {
		case errors.As(err, &loading):
			return nil, loading
		case errors.As(err, &conflict):
			return field.ErrorList{field.Invalid(spec.Child(stageOf(conflict.Field), "overrides"), conflict.Name,
				fmt.Sprintf("with profile %s: %s", osp.Name, conflict.Error()))}, nil
		case errors.As(err, &fe) && strings.HasPrefix(err.Error(), "extension "+x.Namespace+"/"+x.Name+":"):
			return field.ErrorList{field.Invalid(fieldPath(fe.Field), "", fmt.Sprintf("rendering with profile %s for cloud provider %s: %s", osp.Name, cp.Name, errors.Unwrap(fe)))}, nil
		default:
			return field.ErrorList{field.Invalid(spec, "", fmt.Sprintf("profile %s for cloud provider %s does not render with this extension: %v", osp.Name, cp.Name, err))}, nil
		}
	}
	return nil, nil
}

// stageOf returns the stage field of a conflict's "spec.<stage>.overrides".
func stageOf(overridesField string) string {
	if overridesField == "spec.bootstrapConfig.overrides" {
		return "bootstrapConfig"
	}
	return "provisioningConfig"
}

// asSection is an extension's part of a stage in the shape of a profile's section, for the checks they share.
func asSection(c *osmv1alpha1.ExtensionConfig) *osmv1alpha1.OSPConfig {
	return &osmv1alpha1.OSPConfig{Templates: c.Templates, Files: c.Files, Units: c.Units, CloudInitModules: c.CloudInitModules}
}

func pluginRef(ref *osmv1alpha1.PluginReference) string {
	if ref.Builtin != "" {
		return "builtin:" + ref.Builtin
	}
	return ref.Image
}
