package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/sdk/abi"
)

// maxPluginSecrets is the most secrets a profile hands its plugin (the CRD's MaxItems).
const maxPluginSecrets = 16

// validatePluginSecrets checks spec.plugin.secrets: names the plugin can refer to (and that give distinct
// placeholders), each once, each with a Secret name and key. The pipeline's plugins take no secrets: only the
// profile's own plugin is handed credentials, so that adding a plugin to a profile never hands it one.
func validatePluginSecrets(spec osmv1alpha1.OperatingSystemProfileSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range spec.Plugins {
		if len(spec.Plugins[i].Secrets) > 0 {
			errs = append(errs, field.Forbidden(p.Child("plugins").Index(i).Child("secrets"), "only spec.plugin takes secrets"))
		}
	}
	if spec.Plugin == nil {
		return errs
	}
	sp := p.Child("plugin", "secrets")
	if len(spec.Plugin.Secrets) > maxPluginSecrets {
		errs = append(errs, field.TooMany(sp, len(spec.Plugin.Secrets), maxPluginSecrets))
	}
	seen := map[string]bool{}
	for i, s := range spec.Plugin.Secrets {
		ip := sp.Index(i)
		switch {
		case !namePattern.MatchString(s.Name) || len(s.Name) > 63:
			errs = append(errs, field.Invalid(ip.Child("name"), s.Name, "must be lower case letters, digits and dashes (at most 63), e.g. registration-code"))
		case seen[s.Name]:
			errs = append(errs, field.Duplicate(ip.Child("name"), s.Name))
		}
		seen[s.Name] = true
		if s.SecretRef.Name == "" {
			errs = append(errs, field.Required(ip.Child("secretRef", "name"), "the name of a Secret in the profile's namespace"))
		}
		if !secretKeyPattern.MatchString(s.SecretRef.Key) {
			errs = append(errs, field.Invalid(ip.Child("secretRef", "key"), s.SecretRef.Key, "must be a Secret data key: letters, digits, '-', '_' and '.'"))
		}
	}
	return errs
}

// validateSecretDeclarations checks the profile's plugin secrets against those its plugin declares
// (configSchema options of type secret).
func validateSecretDeclarations(md abi.Metadata, ref *osmv1alpha1.PluginReference, p *field.Path) field.ErrorList {
	names := make([]string, 0, len(ref.Secrets))
	for _, s := range ref.Secrets {
		names = append(names, s.Name)
	}
	if err := md.CheckSecrets(names); err != nil {
		return field.ErrorList{field.Invalid(p, "", err.Error())}
	}
	return nil
}

// validateExtensionPluginSecrets refuses secrets on an extension's plugins: an extension may select profiles
// it does not own, and a credential must only reach the plugin the profile's author chose.
func validateExtensionPluginSecrets(refs []osmv1alpha1.PluginReference, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range refs {
		if len(refs[i].Secrets) > 0 {
			errs = append(errs, field.Forbidden(p.Index(i).Child("secrets"), "only a profile's spec.plugin takes secrets"))
		}
	}
	return errs
}
