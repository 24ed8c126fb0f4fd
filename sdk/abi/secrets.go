package abi

import (
	"fmt"
	"slices"
	"strings"
)

// PluginSecret returns the placeholder of the plugin secret name, to be copied verbatim into a file, a unit or a
// command; the host substitutes the Secret's value when it writes the user-data Secret. It fails, naming what
// the profile must add, when the profile does not hand the plugin that secret, so a plugin that needs it
// refuses to render instead of writing a configuration without it.
func (s SecretPlaceholders) PluginSecret(name string) (string, error) {
	if p, ok := s.Plugin[name]; ok && p != "" {
		return p, nil
	}
	have := "it provides none"
	if len(s.Plugin) > 0 {
		have = "it provides " + strings.Join(SortedKeys(s.Plugin), ", ")
	}
	return "", fmt.Errorf("plugin secret %q is not provided: add {name: %s, secretRef: {name: <Secret>, key: <key>}} to the profile's spec.plugin.secrets (%s)", name, name, have)
}

// declaresSecret reports whether the schema has an option of type ConfigSecret named name.
func (m *Metadata) declaresSecret(name string) bool {
	return slices.ContainsFunc(m.ConfigSchema, func(o ConfigOption) bool { return o.Type == ConfigSecret && o.Name == name })
}

// CheckSecrets checks the names of the secrets a profile hands the plugin (spec.plugin.secrets) against the
// ConfigSecret options of its schema: every required one must be provided and, when the plugin declares a
// schema, every name must be declared (a misspelt name would leave the plugin without the secret). A plugin
// without a schema accepts any names.
func (m *Metadata) CheckSecrets(names []string) error {
	if len(m.ConfigSchema) == 0 {
		return nil
	}
	var problems, declared []string
	for _, opt := range m.ConfigSchema {
		if opt.Type != ConfigSecret {
			continue
		}
		declared = append(declared, opt.Name)
		if opt.Required && !slices.Contains(names, opt.Name) {
			problems = append(problems, fmt.Sprintf("secret %s is required: add it to spec.plugin.secrets", opt.Name))
		}
	}
	slices.Sort(declared)
	for _, n := range names {
		if !slices.Contains(declared, n) {
			known := "it declares none"
			if len(declared) > 0 {
				known = "known: " + strings.Join(declared, ", ")
			}
			problems = append(problems, fmt.Sprintf("%s is not a secret of plugin %s (%s)", n, m.Name, known))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("plugin secrets: %s", strings.Join(problems, "; "))
	}
	return nil
}
