package abi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Types of a ConfigOption. Values are strings on the wire; the type decides which strings are valid.
const (
	// ConfigString accepts any string; it is the type of an option without one.
	ConfigString = "string"
	// ConfigBool accepts true or false (also 1, 0, t, f and their upper-case forms, as strconv.ParseBool).
	ConfigBool = "bool"
	// ConfigInt accepts a decimal integer (64 bit).
	ConfigInt = "int"
	// ConfigList accepts items separated by commas or white space; ConfigItems splits them.
	ConfigList = "list"
	// ConfigEnum accepts one of the option's Enum values.
	ConfigEnum = "enum"
	// ConfigSecret declares a plugin secret rather than a config key: the profile provides it in
	// spec.plugin.secrets (name = the option's Name), never in spec.plugin.config, and the plugin receives
	// only its placeholder (RenderContext.Secrets.Plugin). Required means the profile must provide it. It
	// has no default and no enum.
	ConfigSecret = "secret"
)

// checkSchema reports an option the host could not check values against: an unknown type, or an enum
// without values.
func (o ConfigOption) checkSchema() error {
	switch o.Type {
	case "", ConfigString, ConfigBool, ConfigInt, ConfigList:
	case ConfigSecret:
		if o.Default != "" || len(o.Enum) > 0 {
			return fmt.Errorf("configSchema %s: type secret takes no default and no enum values (the value comes from a Secret)", o.Name)
		}
		return nil
	case ConfigEnum:
		if len(o.Enum) == 0 {
			return fmt.Errorf("configSchema %s: type enum needs enum values", o.Name)
		}
	default:
		return fmt.Errorf("configSchema %s: unknown type %q (want string, bool, int, list, enum or secret)", o.Name, o.Type)
	}
	if o.Default != "" {
		if err := o.CheckValue(o.Default); err != nil {
			return fmt.Errorf("configSchema %s: default: %w", o.Name, err)
		}
	}
	return nil
}

// CheckValue reports whether v is a valid value of the option: of its type, and one of Enum when the option
// lists values (whatever its type).
func (o ConfigOption) CheckValue(v string) error {
	switch o.Type {
	case ConfigBool:
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%q is not a boolean: use true or false", v)
		}
	case ConfigInt:
		if _, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
	}
	if len(o.Enum) > 0 && !slices.Contains(o.Enum, v) {
		return fmt.Errorf("%q is not one of %s", v, strings.Join(o.Enum, ", "))
	}
	return nil
}

// ConfigBoolValue reads a value of a ConfigBool option; anything ParseBool refuses is false (the host has
// checked the value already).
func ConfigBoolValue(v string) bool {
	b, _ := strconv.ParseBool(v)
	return b
}

// ConfigIntValue reads a value of a ConfigInt option; anything that is not an integer is 0.
func ConfigIntValue(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n
}

// ConfigItems splits a value of a ConfigList option at commas and white space, dropping empty items.
func ConfigItems(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

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
		v, set := out[opt.Name]
		if opt.Type == ConfigSecret {
			if set {
				problems = append(problems, fmt.Sprintf("%s is a secret: provide it in spec.plugin.secrets (a Secret reference), not in spec.plugin.config", opt.Name))
			}
			continue
		}
		known[opt.Name] = opt
		switch {
		case !set && opt.Default != "":
			out[opt.Name] = opt.Default
		case !set && opt.Required:
			problems = append(problems, fmt.Sprintf("%s is required", opt.Name))
		case set:
			if err := opt.CheckValue(v); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", opt.Name, err))
			}
		}
	}
	for _, k := range SortedKeys(config) {
		if _, ok := known[k]; !ok && !m.declaresSecret(k) {
			problems = append(problems, fmt.Sprintf("%s is not a setting of plugin %s (known: %s)", k, m.Name, strings.Join(SortedKeys(known), ", ")))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("plugin config: %s", strings.Join(problems, "; "))
	}
	return out, nil
}
