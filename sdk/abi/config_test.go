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
		{name: "enum", schema: schema, config: map[string]string{"mirror": "m", "channel": "nightly"}, wantErr: `channel is "nightly", want one of stable, beta`},
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
