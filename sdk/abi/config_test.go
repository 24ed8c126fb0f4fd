package abi

import (
	"maps"
	"strings"
	"testing"
)

func TestApplyConfig(t *testing.T) {
	schema := []ConfigOption{
		{Name: "mirror", Required: true},
		{Name: "channel", Default: "stable", Enum: []string{"stable", "beta"}},
	}
	typed := []ConfigOption{
		{Name: "debug", Type: ConfigBool},
		{Name: "maxPods", Type: ConfigInt},
		{Name: "mode", Type: ConfigEnum, Enum: []string{"strict", "relaxed"}},
		{Name: "packages", Type: ConfigList},
	}
	tests := []struct {
		name    string
		schema  []ConfigOption
		config  map[string]string
		want    map[string]string
		wantErr string
	}{
		{name: "no schema accepts anything", config: map[string]string{"x": "1"}, want: map[string]string{"x": "1"}},
		{name: "defaults", schema: schema, config: map[string]string{"mirror": "m"}, want: map[string]string{"mirror": "m", "channel": "stable"}},
		{name: "explicit value kept", schema: schema, config: map[string]string{"mirror": "m", "channel": "beta"}, want: map[string]string{"mirror": "m", "channel": "beta"}},
		{name: "missing required", schema: schema, config: nil, wantErr: "mirror is required"},
		{name: "enum", schema: schema, config: map[string]string{"mirror": "m", "channel": "nightly"}, wantErr: `channel: "nightly" is not one of stable, beta`},
		{name: "bool", schema: typed, config: map[string]string{"debug": "yes"}, wantErr: `debug: "yes" is not a boolean`},
		{name: "int", schema: typed, config: map[string]string{"maxPods": "many"}, wantErr: `maxPods: "many" is not an integer`},
		{name: "enum type", schema: typed, config: map[string]string{"mode": "fast"}, wantErr: `mode: "fast" is not one of strict, relaxed`},
		{name: "typed values", schema: typed, config: map[string]string{"debug": "true", "maxPods": " 110", "mode": "relaxed", "packages": "a, b c"},
			want: map[string]string{"debug": "true", "maxPods": " 110", "mode": "relaxed", "packages": "a, b c"}},
		{name: "a secret is not config", schema: append(schema, ConfigOption{Name: "regcode", Type: ConfigSecret, Required: true}),
			config: map[string]string{"mirror": "m"}, want: map[string]string{"mirror": "m", "channel": "stable"}},
		{name: "a secret in config is refused", schema: append(schema, ConfigOption{Name: "regcode", Type: ConfigSecret}),
			config: map[string]string{"mirror": "m", "regcode": "plain-text"}, wantErr: "regcode is a secret: provide it in spec.plugin.secrets"},
		{name: "unknown key", schema: schema, config: map[string]string{"mirror": "m", "mirorr": "x"}, wantErr: "mirorr is not a setting of plugin p (known: channel, mirror)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Metadata{Name: "p", ConfigSchema: tt.schema}
			got, err := m.ApplyConfig(tt.config)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ApplyConfig() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Fatalf("ApplyConfig() = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestConfigSchemaIsCheckedAtLoad(t *testing.T) {
	base := Metadata{ABIVersion: Version, Name: "p", Version: "1.0.0", OperatingSystems: []OperatingSystem{{Name: "x"}},
		ProvisioningUtilities: []string{UtilityCloudInit}, CloudProviders: []string{"*"}}
	for _, tt := range []struct {
		opt  ConfigOption
		want string
	}{
		{ConfigOption{Name: "a", Type: "number"}, `configSchema a: unknown type "number"`},
		{ConfigOption{Name: "b", Type: ConfigEnum}, "configSchema b: type enum needs enum values"},
		{ConfigOption{Name: "c", Type: ConfigInt, Default: "ten"}, `configSchema c: default: "ten" is not an integer`},
		{ConfigOption{Name: "d", Type: ConfigSecret, Default: "hunter2"}, "configSchema d: type secret takes no default"},
	} {
		m := base
		m.ConfigSchema = []ConfigOption{tt.opt}
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate() = %v, want %q", err, tt.want)
		}
	}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValueHelpers(t *testing.T) {
	if !ConfigBoolValue("true") || ConfigBoolValue("no") || ConfigIntValue(" 42") != 42 ||
		strings.Join(ConfigItems("a, b\tc,,"), "|") != "a|b|c" {
		t.Error("config value helpers disagree with their types")
	}
}
