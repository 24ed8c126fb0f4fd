package abi

import (
	"strings"
	"testing"
)

func TestNodeConfigValidate(t *testing.T) {
	ok := PlainFile("/etc/a", 0o644, "a")
	tests := []struct {
		name    string
		cfg     NodeConfig
		wantErr string
	}{
		{name: "empty", cfg: NodeConfig{}},
		{name: "valid", cfg: NodeConfig{Files: []File{ok}, Units: []Unit{{Name: "a.service"}}}},
		{name: "empty path", cfg: NodeConfig{Files: []File{PlainFile("", 0o644, "")}}, wantErr: "files[0]: path is empty"},
		{name: "relative path", cfg: NodeConfig{Files: []File{PlainFile("etc/a", 0o644, "")}}, wantErr: `path "etc/a" is not absolute`},
		{name: "duplicate path", cfg: NodeConfig{Files: []File{ok, ok}}, wantErr: `files[1]: path "/etc/a" appears more than once`},
		{name: "no content", cfg: NodeConfig{Files: []File{{Path: "/a"}}}, wantErr: "content.inline is missing"},
		{name: "unit without name", cfg: NodeConfig{Units: []Unit{{}}}, wantErr: "units[0]: name is empty"},
		{name: "duplicate unit", cfg: NodeConfig{Units: []Unit{{Name: "a"}, {Name: "a"}}}, wantErr: `unit "a" appears more than once`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckEnvelope(t *testing.T) {
	tests := []struct {
		v       string
		wantErr bool
	}{{"v1", false}, {"v1.3", false}, {"", true}, {"v2", true}, {"1", true}}
	for _, tt := range tests {
		if err := CheckEnvelope("response", tt.v); (err != nil) != tt.wantErr {
			t.Errorf("CheckEnvelope(%q) = %v, wantErr %v", tt.v, err, tt.wantErr)
		}
	}
}

func TestImplements(t *testing.T) {
	m := Metadata{}
	if !m.Implements(ExportValidate) {
		t.Error("metadata without exports must implement everything")
	}
	m.Exports = []string{ExportMetadata, ExportRender}
	if m.Implements(ExportValidate) || !m.Implements(ExportRender) {
		t.Errorf("Implements with %v is wrong", m.Exports)
	}
}
