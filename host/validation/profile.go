// Package validation checks OperatingSystemProfiles beyond what the CRD schema can express: templates that
// parse and execute, a plugin that resolves and supports the profile, and version bumps on change. The
// admission webhook and `osmctl lint` share it, so both say the same thing, naming the field.
package validation

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/nodeconfig"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/templates"
	"github.com/osmhq/osm/sdk/abi"
)

// ProfileValidator validates profiles.
type ProfileValidator struct {
	// Plugins resolves plugin references. Without it, profiles with a plugin are reported as unresolvable.
	Plugins render.PluginSource
	// Settings are the controller's node settings, used for the trial render.
	Settings render.Settings
}

// pluginValidator is implemented by plugins that check profiles themselves (osm_validate).
type pluginValidator interface {
	Validate(ctx context.Context, req *abi.ValidateRequest) (*abi.ValidateResponse, error)
}

// discarder is implemented by plugins that can be unloaded once the caller is done with them.
type discarder interface{ Discard() }

var (
	semverPattern = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	namePattern   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// secretKeyPattern is what a Secret's data key may be.
	secretKeyPattern = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,253}$`)
)

// ValidateStructure checks what needs no plugin and no render: the header fields, and that files, units and
// templates are well formed and parse.
func (v *ProfileValidator) ValidateStructure(osp *osmv1alpha1.OperatingSystemProfile) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateHeader(osp, spec)
	errs = append(errs, validatePluginSecrets(osp.Spec, spec)...)
	errs = append(errs, validateSection(&osp.Spec.BootstrapConfig, spec.Child("bootstrapConfig"))...)
	return append(errs, validateSection(&osp.Spec.ProvisioningConfig, spec.Child("provisioningConfig"))...)
}

// Validate returns everything wrong with osp, each error naming its field.
func (v *ProfileValidator) Validate(ctx context.Context, osp *osmv1alpha1.OperatingSystemProfile) field.ErrorList {
	spec := field.NewPath("spec")
	errs := v.ValidateStructure(osp)
	plugin, perrs := v.validatePlugin(ctx, osp, spec)
	if d, ok := plugin.(discarder); ok {
		defer d.Discard() // a review keeps nothing loaded; the profile's first render loads the plugin again
	}
	errs = append(errs, perrs...)
	if len(errs) > 0 {
		// A trial render would only repeat these errors less precisely.
		return errs
	}
	return append(errs, v.trialRender(ctx, osp, plugin)...)
}

func validateHeader(osp *osmv1alpha1.OperatingSystemProfile, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !semverPattern.MatchString(osp.Spec.Version) {
		errs = append(errs, field.Invalid(spec.Child("version"), osp.Spec.Version, "must be a semantic version with a leading v, e.g. v1.2.0"))
	}
	if !namePattern.MatchString(string(osp.Spec.OSName)) {
		errs = append(errs, field.Invalid(spec.Child("osName"), osp.Spec.OSName, "must be lower case letters, digits and dashes"))
	}
	if osp.Spec.OSVersion == "" {
		errs = append(errs, field.Required(spec.Child("osVersion"), ""))
	}
	if len(osp.Spec.SupportedCloudProviders) == 0 {
		errs = append(errs, field.Required(spec.Child("supportedCloudProviders"), "at least one cloud provider"))
	}
	seen := map[string]bool{}
	for i, cp := range osp.Spec.SupportedCloudProviders {
		p := spec.Child("supportedCloudProviders").Index(i)
		switch {
		case !namePattern.MatchString(cp.Name):
			errs = append(errs, field.Invalid(p.Child("name"), cp.Name, "must be a machine-controller cloud provider name"))
		case seen[cp.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), cp.Name))
		}
		seen[cp.Name] = true
		if len(cp.Spec.Raw) > 0 && !json.Valid(cp.Spec.Raw) {
			errs = append(errs, field.Invalid(p.Child("spec"), string(cp.Spec.Raw), "must be a JSON object"))
		}
	}
	return errs
}

// validateSection checks one of bootstrapConfig/provisioningConfig: file and unit structure, and that every
// template parses.
func validateSection(cfg *osmv1alpha1.OSPConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, text := range cfg.Templates {
		if err := templates.CheckSyntax(name, text); err != nil {
			errs = append(errs, field.Invalid(p.Child("templates").Key(name), "", err.Error()))
		}
	}
	errs = append(errs, validateFiles(cfg.Files, p.Child("files"))...)
	own := map[string]bool{}
	for _, f := range cfg.Files {
		own[f.Path] = true
	}
	runtimes := map[osmv1alpha1.ContainerRuntime]bool{}
	for i, cr := range cfg.SupportedContainerRuntimes {
		cp := p.Child("supportedContainerRuntimes").Index(i)
		if runtimes[cr.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), cr.Name))
		}
		runtimes[cr.Name] = true
		for name, text := range cr.Templates {
			if err := templates.CheckSyntax(name, text); err != nil {
				errs = append(errs, field.Invalid(cp.Child("templates").Key(name), "", err.Error()))
			}
		}
		errs = append(errs, validateFiles(cr.Files, cp.Child("files"))...)
		for j, f := range cr.Files {
			if own[f.Path] {
				errs = append(errs, field.Duplicate(cp.Child("files").Index(j).Child("path"), f.Path))
			}
		}
	}
	seen := map[string]bool{}
	for i, u := range cfg.Units {
		up := p.Child("units").Index(i)
		if problem := unitNameProblem(u.Name); problem != "" {
			errs = append(errs, field.Invalid(up.Child("name"), u.Name, problem))
		}
		if seen[u.Name] {
			errs = append(errs, field.Duplicate(up.Child("name"), u.Name))
		}
		seen[u.Name] = true
		for j, d := range u.DropIns {
			if problem := dropInNameProblem(d.Name); problem != "" {
				errs = append(errs, field.Invalid(up.Child("dropIns").Index(j).Child("name"), d.Name, problem))
			}
		}
	}
	return errs
}

func validateFiles(files []osmv1alpha1.File, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, f := range files {
		fp := p.Index(i)
		switch problem := pathProblem(f.Path); {
		case problem != "":
			errs = append(errs, field.Invalid(fp.Child("path"), f.Path, problem))
		case seen[f.Path]:
			errs = append(errs, field.Duplicate(fp.Child("path"), f.Path))
		}
		seen[f.Path] = true
		if f.Permissions != nil && *f.Permissions != 0 {
			if _, err := nodeconfig.Mode(f.Permissions); err != nil {
				errs = append(errs, field.Invalid(fp.Child("permissions"), *f.Permissions, err.Error()))
			}
		}
		if f.Content.Inline == nil {
			errs = append(errs, field.Required(fp.Child("content", "inline"), ""))
			continue
		}
		if _, err := nodeconfig.ParseEncoding(f.Content.Inline.Encoding); err != nil {
			errs = append(errs, field.NotSupported(fp.Child("content", "inline", "encoding"), f.Content.Inline.Encoding,
				[]string{"", "b64", "base64", "gzip", "gz", "gzip+base64", "gz+base64", "gzip+b64", "gz+b64"}))
		}
		if err := templates.CheckSyntax(f.Path, f.Content.Inline.Data); err != nil {
			errs = append(errs, field.Invalid(fp.Child("content", "inline", "data"), "", err.Error()))
		}
	}
	return errs
}

// validatePlugin resolves the plugin and checks that it supports the profile.
func (v *ProfileValidator) validatePlugin(ctx context.Context, osp *osmv1alpha1.OperatingSystemProfile, spec *field.Path) (render.Plugin, field.ErrorList) {
	ref := osp.Spec.Plugin
	pp := spec.Child("plugin")
	utility := string(osp.Spec.ProvisioningUtility)
	if utility == "" {
		utility = abi.UtilityCloudInit
	}
	if ref == nil {
		if utility != abi.UtilityCloudInit && utility != abi.UtilityIgnition {
			return nil, field.ErrorList{field.NotSupported(spec.Child("provisioningUtility"), utility, []string{abi.UtilityCloudInit, abi.UtilityIgnition})}
		}
		return nil, nil
	}
	switch {
	case ref.Builtin != "" && ref.Image != "", ref.Builtin == "" && ref.Image == "":
		return nil, field.ErrorList{field.Invalid(pp, "", "exactly one of builtin or image must be set")}
	case v.Plugins == nil:
		return nil, field.ErrorList{field.InternalError(pp, fmt.Errorf("no plugin source configured"))}
	}
	where := pp.Child("builtin")
	if ref.Image != "" {
		where = pp.Child("image")
	}
	plugin, err := v.Plugins.Resolve(ctx, osp.Namespace, ref)
	if err != nil {
		if strings.Contains(err.Error(), "config") {
			return nil, field.ErrorList{field.Invalid(pp.Child("config"), "", err.Error())}
		}
		return nil, field.ErrorList{field.Invalid(where, ref.Builtin+ref.Image, err.Error())}
	}
	md := plugin.Metadata()
	errs := validateSecretDeclarations(md, ref, pp.Child("secrets"))
	if !md.SupportsOS(string(osp.Spec.OSName), osp.Spec.OSVersion) {
		errs = append(errs, field.Invalid(spec.Child("osName"), fmt.Sprintf("%s %s", osp.Spec.OSName, osp.Spec.OSVersion),
			fmt.Sprintf("plugin %q does not support this operating system and version (it supports %s)", md.Name, describeOSes(md))))
	}
	if !md.SupportsUtility(utility) {
		errs = append(errs, field.NotSupported(spec.Child("provisioningUtility"), utility, md.ProvisioningUtilities))
	}
	for i, cp := range osp.Spec.SupportedCloudProviders {
		if !md.SupportsCloudProvider(cp.Name) {
			errs = append(errs, field.NotSupported(spec.Child("supportedCloudProviders").Index(i).Child("name"), cp.Name, md.CloudProviders))
		}
	}
	if pv, ok := plugin.(pluginValidator); ok && len(errs) == 0 {
		var providers []string
		for _, cp := range osp.Spec.SupportedCloudProviders {
			providers = append(providers, cp.Name)
		}
		resp, err := pv.Validate(ctx, &abi.ValidateRequest{ABIVersion: abi.Version, OSName: string(osp.Spec.OSName),
			OSVersion: osp.Spec.OSVersion, ProvisioningUtility: utility, CloudProviders: providers})
		if err != nil {
			errs = append(errs, field.Invalid(pp, ref.Builtin+ref.Image, err.Error()))
		} else {
			for _, fe := range resp.Errors {
				errs = append(errs, field.Invalid(fieldPath(fe.Field), "", fe.Message))
			}
		}
	}
	return plugin, errs
}

func describeOSes(md abi.Metadata) string {
	var parts []string
	for _, os := range md.OperatingSystems {
		parts = append(parts, os.Name+" "+strings.Join(os.Versions, "/"))
	}
	return strings.Join(parts, ", ")
}

// fieldPath turns a plugin's dotted field ("spec.plugin.config.mirror") into a field.Path.
func fieldPath(s string) *field.Path {
	if s == "" {
		return field.NewPath("spec", "plugin")
	}
	parts := strings.Split(s, ".")
	return field.NewPath(parts[0], parts[1:]...)
}

// ValidateUpdate checks that a changed spec comes with a higher spec.version: the version is what tells the
// controller to re-render the machines that use the profile, and a downgrade would hide a change.
func ValidateUpdate(oldOSP, newOSP *osmv1alpha1.OperatingSystemProfile) field.ErrorList {
	p := field.NewPath("spec", "version")
	oldJSON, _ := json.Marshal(withoutVersion(oldOSP.Spec))
	newJSON, _ := json.Marshal(withoutVersion(newOSP.Spec))
	oldV, err1 := semver.NewVersion(oldOSP.Spec.Version)
	newV, err2 := semver.NewVersion(newOSP.Spec.Version)
	if err1 != nil || err2 != nil {
		return nil // the header check reports a malformed version
	}
	if newV.LessThan(oldV) {
		return field.ErrorList{field.Invalid(p, newOSP.Spec.Version, fmt.Sprintf("must not go down from %s", oldOSP.Spec.Version))}
	}
	if string(oldJSON) != string(newJSON) && !newV.GreaterThan(oldV) {
		return field.ErrorList{field.Invalid(p, newOSP.Spec.Version,
			fmt.Sprintf("the spec changed, so spec.version must be raised above %s; the version tells OSM to re-render the machines using this profile", oldOSP.Spec.Version))}
	}
	return nil
}

func withoutVersion(s osmv1alpha1.OperatingSystemProfileSpec) osmv1alpha1.OperatingSystemProfileSpec {
	s.Version = ""
	return s
}
