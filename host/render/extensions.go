package render

import (
	"context"
	"errors"
	"fmt"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/extension"
	"github.com/osmhq/osm/host/templates"
	"github.com/osmhq/osm/sdk/abi"
)

// AppliedExtension is an extension a render applied, as the OperatingSystemConfig's status names it.
type AppliedExtension = osmv1alpha1.AppliedExtension

// applyExtensions adds each extension's part of the stage (its files rendered with the profile's template data),
// in the order of in.Extensions, then runs the extensions' plugins on the result. A collision that an extension
// does not declare as an override fails the render with ReasonExtensionConflict.
func (o *Output) applyExtensions(ctx context.Context, r *Renderer, m *machine, stage abi.Stage, cfg *abi.NodeConfig, data any,
	budget *templates.Stage, guard *stageGuard) (*abi.NodeConfig, error) {
	merger := extension.NewMerger(cfg)
	for _, x := range m.Extensions {
		part, field := x.Spec.ProvisioningConfig, "spec.provisioningConfig"
		if stage == abi.StageBootstrap {
			part, field = x.Spec.BootstrapConfig, "spec.bootstrapConfig"
		}
		if part == nil {
			continue
		}
		add, err := budget.Render(field, &osmv1alpha1.OSPConfig{
			Templates: part.Templates, Files: part.Files, Units: part.Units, CloudInitModules: part.CloudInitModules,
		}, m.Settings.ContainerRuntime, data)
		if err != nil {
			return nil, withReason(osmv1alpha1.ReasonTemplateError, fmt.Errorf("extension %s: %w", objectName(x.Namespace, x.Name), err))
		}
		if err := merger.Add(x.Name, field+".overrides", part.Overrides, add); err != nil {
			return nil, withReason(osmv1alpha1.ReasonExtensionConflict, err)
		}
		if err := guard.check(contributor{name: fmt.Sprintf("extension %s %s", objectName(x.Namespace, x.Name), field), kind: byOther}, cfg); err != nil {
			return nil, err
		}
	}
	for _, x := range m.Extensions {
		for i := range x.Spec.Plugins {
			p, err := r.resolve(ctx, m, &x.Spec.Plugins[i], fmt.Sprintf("extension %s spec.plugins[%d]", objectName(x.Namespace, x.Name), i))
			if err != nil {
				return nil, err
			}
			if cfg, err = o.callRender(ctx, m, p, x.Spec.Plugins[i].Config, o.context, stage, cfg); err != nil {
				return nil, fmt.Errorf("extension %s: %w", objectName(x.Namespace, x.Name), err)
			}
			if err := guard.check(contributor{name: fmt.Sprintf("extension %s spec.plugins[%d] (plugin %s)", objectName(x.Namespace, x.Name), i, p.Metadata().Name), kind: byOther}, cfg); err != nil {
				return nil, err
			}
		}
	}
	return cfg, nil
}

// appliedExtensions lists the extensions a render applied, with their generation, for the OSC's status.
func appliedExtensions(xs []*osmv1alpha1.OperatingSystemProfileExtension) []AppliedExtension {
	var out []AppliedExtension
	for _, x := range xs {
		out = append(out, AppliedExtension{Name: x.Name, Generation: x.Generation})
	}
	return out
}

// resolve loads a plugin — the profile's (what is empty), one of its pipeline or of an extension (what names
// the reference in errors) — and checks that it renders for the machine.
func (r *Renderer) resolve(ctx context.Context, m *machine, ref *osmv1alpha1.PluginReference, what string) (Plugin, error) {
	named := func(err error) error {
		if what == "" {
			return err
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if r.Plugins == nil {
		return nil, withReason(osmv1alpha1.ReasonPluginNotFound, named(errors.New("profile has a plugin but no plugin source is configured")))
	}
	p, err := r.Plugins.Resolve(ctx, m.Profile.Namespace, ref)
	if err != nil {
		var re *Error
		if !errors.As(err, &re) {
			err = named(err)
		}
		return nil, err
	}
	md := p.Metadata()
	osp := m.Profile
	switch {
	case !md.SupportsOS(string(osp.Spec.OSName), osp.Spec.OSVersion):
		return nil, unsupported(named(fmt.Errorf("plugin %q does not support %s %s", md.Name, osp.Spec.OSName, osp.Spec.OSVersion)))
	case !md.SupportsUtility(m.utility):
		return nil, unsupported(named(fmt.Errorf("plugin %q does not render for provisioning utility %q", md.Name, m.utility)))
	case !md.SupportsCloudProvider(m.cloudProvider()):
		return nil, unsupported(named(fmt.Errorf("plugin %q does not support cloud provider %q", md.Name, m.cloudProvider())))
	}
	return p, nil
}
