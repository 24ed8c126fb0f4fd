// Package validation checks OperatingSystemProfiles beyond what the CRD schema can express: templates that
// parse and execute, a plugin that resolves and supports the profile, and version bumps on change. The
// admission webhook and `osmctl lint` share it, so both say the same thing, naming the field.
package validation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

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
	// PluginWait bounds how long Review waits for the profile's plugin to load (pull and compile); zero waits
	// as long as the context allows, as `osmctl lint` does. The admission webhook uses AdmissionPluginWait.
	PluginWait time.Duration
	// Shipped are the profiles this build ships (the default profiles). A profile whose spec is exactly one of
	// theirs needs no plugin and no trial render: the build tests them (plugins TestDefaultProfiles and
	// TestDefaultProfilesPassAdmission), so installing or upgrading the defaults never waits for a plugin to compile.
	Shipped []*osmv1alpha1.OperatingSystemProfile

	shippedOnce sync.Once
	shipped     map[string]bool
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
	errs, _ := v.Review(ctx, osp)
	return errs
}

// Review returns everything wrong with osp, each error naming its field, and warnings. With PluginWait set,
// a plugin that has not loaded within it is not waited for: Review then checks the structure and the templates
// (a trial render with a stand-in for the plugin, which reports template errors only) and returns a warning
// saying what was not checked; the load goes on in the background. A shipped profile (Shipped) is checked for
// structure only.
func (v *ProfileValidator) Review(ctx context.Context, osp *osmv1alpha1.OperatingSystemProfile) (field.ErrorList, []string) {
	spec := field.NewPath("spec")
	errs := v.ValidateStructure(osp)
	if v.isShipped(osp) {
		return errs, nil
	}
	src := v.Plugins
	if src != nil && v.PluginWait > 0 {
		src = newBounded(src, v.PluginWait)
	}
	plugin, perrs, loading := v.validatePlugin(ctx, osp, spec, src)
	if d, ok := plugin.(discarder); ok {
		defer d.Discard() // a review keeps nothing loaded; the profile's first render loads the plugin again
	}
	errs = append(errs, perrs...)
	if len(errs) > 0 {
		// A trial render would only repeat these errors less precisely.
		return errs, nil
	}
	if loading != nil {
		return templateErrors(v.trialRender(ctx, osp, newStandIn(osp))), []string{loading.warning(pluginPath(osp))}
	}
	return v.trialRender(ctx, osp, plugin), nil
}

// Warm loads the plugins of the shipped profiles, so that reviews of profiles using them do not wait for a
// compile; the plugins stay loaded until the plugin manager's idle timeout. It returns when all have loaded or
// failed to, or ctx ends.
func (v *ProfileValidator) Warm(ctx context.Context) error {
	if v.Plugins == nil {
		return nil
	}
	seen := map[string]bool{}
	var failed []string
	for _, osp := range v.Shipped {
		refs := []*osmv1alpha1.PluginReference{osp.Spec.Plugin}
		for i := range osp.Spec.Plugins {
			refs = append(refs, &osp.Spec.Plugins[i])
		}
		for _, ref := range refs {
			if ref == nil || seen[pluginRef(ref)] {
				continue
			}
			seen[pluginRef(ref)] = true
			if err := ctx.Err(); err != nil {
				return err
			}
			if _, err := v.Plugins.Resolve(ctx, osp.Namespace, ref); err != nil {
				failed = append(failed, err.Error())
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("loading the default profiles' plugins: %s", strings.Join(failed, "; "))
	}
	return nil
}

// isShipped reports whether osp's spec is exactly that of a shipped profile.
func (v *ProfileValidator) isShipped(osp *osmv1alpha1.OperatingSystemProfile) bool {
	if len(v.Shipped) == 0 {
		return false
	}
	v.shippedOnce.Do(func() { v.shipped = shippedSpecs(v.Shipped) })
	data, err := json.Marshal(osp.Spec)
	return err == nil && v.shipped[string(data)]
}

// templateErrors keeps the errors a trial render found in templates.
func templateErrors(errs field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if e.Type == field.ErrorTypeInvalid && !strings.HasPrefix(e.Field, "spec.supportedCloudProviders") {
			out = append(out, e)
		}
	}
	return out
}

func pluginPath(osp *osmv1alpha1.OperatingSystemProfile) string {
	if osp.Spec.Plugin != nil && osp.Spec.Plugin.Image != "" {
		return "spec.plugin.image"
	}
	if osp.Spec.Plugin != nil && osp.Spec.Plugin.Builtin != "" {
		return "spec.plugin.builtin"
	}
	return "spec.plugins"
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
// A plugin that is still loading after a bounded source's wait comes back as loading, with no errors.
func (v *ProfileValidator) validatePlugin(ctx context.Context, osp *osmv1alpha1.OperatingSystemProfile, spec *field.Path, src render.PluginSource) (render.Plugin, field.ErrorList, *PluginLoadingError) {
	ref := osp.Spec.Plugin
	pp := spec.Child("plugin")
	utility := string(osp.Spec.ProvisioningUtility)
	if utility == "" {
		utility = abi.UtilityCloudInit
	}
	if ref == nil {
		if utility != abi.UtilityCloudInit && utility != abi.UtilityIgnition {
			return nil, field.ErrorList{field.NotSupported(spec.Child("provisioningUtility"), utility, []string{abi.UtilityCloudInit, abi.UtilityIgnition})}, nil
		}
		return nil, nil, nil
	}
	switch {
	case ref.Builtin != "" && ref.Image != "", ref.Builtin == "" && ref.Image == "":
		return nil, field.ErrorList{field.Invalid(pp, "", "exactly one of builtin or image must be set")}, nil
	case src == nil:
		return nil, field.ErrorList{field.InternalError(pp, fmt.Errorf("no plugin source configured"))}, nil
	}
	where := pp.Child("builtin")
	if ref.Image != "" {
		where = pp.Child("image")
	}
	plugin, err := src.Resolve(ctx, osp.Namespace, ref)
	var loading *PluginLoadingError
	switch {
	case errors.As(err, &loading):
		return nil, nil, loading
	case err != nil && strings.Contains(err.Error(), "config"):
		return nil, field.ErrorList{field.Invalid(pp.Child("config"), "", err.Error())}, nil
	case err != nil:
		return nil, field.ErrorList{field.Invalid(where, ref.Builtin+ref.Image, err.Error())}, nil
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
	return plugin, errs, nil
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
	s.AllowedNamespaces = nil // who may use the profile, not what it renders: no version bump needed
	return s
}
