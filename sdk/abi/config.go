package abi

import (
	"fmt"
	"slices"
	"strings"
)

// ApplyConfig checks a profile's spec.plugin.config against the plugin's ConfigSchema and returns it with
// the schema's defaults filled in, which is what RenderRequest.Config carries. A plugin that declares no
// schema accepts any keys. With a schema, unknown keys are refused, because a misspelt key silently ignored
// would render a node without the setting the operator asked for.
func (m *Metadata) ApplyConfig(config map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(config)+len(m.ConfigSchema))
	for k, v := range config {
		out[k] = v
	}
	if len(m.ConfigSchema) == 0 {
		return out, nil
	}
	known := make(map[string]ConfigOption, len(m.ConfigSchema))
	var problems []string
	for _, opt := range m.ConfigSchema {
		known[opt.Name] = opt
		v, set := out[opt.Name]
		switch {
		case !set && opt.Default != "":
			out[opt.Name] = opt.Default
		case !set && opt.Required:
			problems = append(problems, fmt.Sprintf("%s is required", opt.Name))
		case set && len(opt.Enum) > 0 && !slices.Contains(opt.Enum, v):
			problems = append(problems, fmt.Sprintf("%s is %q, want one of %s", opt.Name, v, strings.Join(opt.Enum, ", ")))
		}
	}
	for _, k := range SortedKeys(config) {
		if _, ok := known[k]; !ok {
			problems = append(problems, fmt.Sprintf("%s is not a setting of plugin %s (known: %s)", k, m.Name, strings.Join(SortedKeys(known), ", ")))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("plugin config: %s", strings.Join(problems, "; "))
	}
	return out, nil
}
