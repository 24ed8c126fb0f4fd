package abi

import (
	"strings"
	"testing"
)

func TestPluginSecret(t *testing.T) {
	s := SecretPlaceholders{Plugin: map[string]string{"registration-code": "__OSM_SECRET_PLUGIN_REGISTRATION_CODE__"}}
	if got, err := s.PluginSecret("registration-code"); err != nil || got != "__OSM_SECRET_PLUGIN_REGISTRATION_CODE__" {
		t.Fatalf("PluginSecret() = %q, %v", got, err)
	}
	for _, tt := range []struct {
		secrets SecretPlaceholders
		want    string
	}{
		{s, `plugin secret "mirror-password" is not provided: add {name: mirror-password, secretRef: {name: <Secret>, key: <key>}} to the profile's spec.plugin.secrets (it provides registration-code)`},
		{SecretPlaceholders{}, "(it provides none)"},
	} {
		if _, err := tt.secrets.PluginSecret("mirror-password"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("PluginSecret() error = %v, want %q", err, tt.want)
		}
	}
}

func TestCheckSecrets(t *testing.T) {
	schema := []ConfigOption{
		{Name: "mirror"},
		{Name: "registration-code", Type: ConfigSecret, Required: true},
		{Name: "mirror-password", Type: ConfigSecret},
	}
	tests := []struct {
		name    string
		schema  []ConfigOption
		names   []string
		wantErr string
	}{
		{name: "no schema accepts any", names: []string{"anything"}},
		{name: "required and optional", schema: schema, names: []string{"registration-code", "mirror-password"}},
		{name: "required only", schema: schema, names: []string{"registration-code"}},
		{name: "required missing", schema: schema, names: []string{"mirror-password"}, wantErr: "secret registration-code is required: add it to spec.plugin.secrets"},
		{name: "undeclared", schema: schema, names: []string{"registration-code", "regcode"},
			wantErr: "regcode is not a secret of plugin p (known: mirror-password, registration-code)"},
		{name: "a config key is not a secret", schema: schema, names: []string{"registration-code", "mirror"}, wantErr: "mirror is not a secret of plugin p"},
		{name: "schema without secrets", schema: schema[:1], names: []string{"x"}, wantErr: "x is not a secret of plugin p (it declares none)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Metadata{Name: "p", ConfigSchema: tt.schema}
			err := m.CheckSecrets(tt.names)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("CheckSecrets() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
