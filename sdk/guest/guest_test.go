package guest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
)

// fake is a configurable plugin for table tests.
type fake struct {
	render func(*abi.RenderRequest) (*abi.RenderResponse, error)
}

func (fake) Metadata() abi.Metadata {
	return abi.Metadata{Name: "fake", Version: "0.1.0", OperatingSystems: []abi.OperatingSystem{{Name: "fakeos"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit}, CloudProviders: []string{"*"}}
}

func (f fake) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) { return f.render(req) }

type validating struct{ fake }

func (validating) Validate(req *abi.ValidateRequest) (*abi.ValidateResponse, error) {
	return &abi.ValidateResponse{Errors: []abi.FieldError{{Field: "spec.osVersion", Message: req.OSVersion}}}, nil
}

func echo(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	return &abi.RenderResponse{Config: req.Input}, nil
}

func TestCallMetadataFillsEnvelope(t *testing.T) {
	tests := []struct {
		name   string
		plugin Plugin
		want   []string
	}{
		{name: "render only", plugin: fake{render: echo}, want: []string{abi.ExportMetadata, abi.ExportRender}},
		{name: "validator", plugin: validating{fake{render: echo}}, want: []string{abi.ExportMetadata, abi.ExportRender, abi.ExportValidate}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md, err := CallMetadata(tt.plugin)
			if err != nil {
				t.Fatal(err)
			}
			if md.ABIVersion != abi.Version {
				t.Errorf("abiVersion = %q, want %q", md.ABIVersion, abi.Version)
			}
			if strings.Join(md.Exports, ",") != strings.Join(tt.want, ",") {
				t.Errorf("exports = %v, want %v", md.Exports, tt.want)
			}
		})
	}
}

func TestCall(t *testing.T) {
	input := abi.NodeConfig{Files: []abi.File{abi.PlainFile("/etc/motd", 0o644, "hello")}}
	tests := []struct {
		name    string
		render  func(*abi.RenderRequest) (*abi.RenderResponse, error)
		wantErr string
	}{
		{name: "echo", render: echo},
		{name: "plugin error", render: func(*abi.RenderRequest) (*abi.RenderResponse, error) {
			return nil, errors.New("config key mirror is not a URL")
		}, wantErr: "config key mirror is not a URL"},
		{name: "panic", render: func(*abi.RenderRequest) (*abi.RenderResponse, error) { panic("boom") },
			wantErr: "plugin panicked: boom"},
		{name: "nil response", render: func(*abi.RenderRequest) (*abi.RenderResponse, error) { return nil, nil },
			wantErr: "Render returned neither a response nor an error"},
		{name: "invalid output", render: func(*abi.RenderRequest) (*abi.RenderResponse, error) {
			return &abi.RenderResponse{Config: abi.NodeConfig{Files: []abi.File{abi.PlainFile("relative", 0o644, "")}}}, nil
		}, wantErr: "is not absolute"},
		{name: "foreign abi version kept", render: func(*abi.RenderRequest) (*abi.RenderResponse, error) {
			return &abi.RenderResponse{ABIVersion: "v2"}, nil
		}, wantErr: `render response has abiVersion "v2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Call(fake{render: tt.render}, &abi.RenderRequest{Stage: abi.StageProvisioning, Input: input})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Call() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.ABIVersion != abi.Version || len(resp.Config.Files) != 1 || resp.Config.Files[0].Content.Inline.Data != "hello" {
				t.Errorf("unexpected response %+v", resp)
			}
		})
	}
}

func TestInvokeRejectsBadRequests(t *testing.T) {
	p := fake{render: echo}
	tests := []struct {
		name, export, input, wantErr string
	}{
		{name: "not json", export: abi.ExportRender, input: "{", wantErr: "cannot decode render request"},
		{name: "no version", export: abi.ExportRender, input: "{}", wantErr: "render request has no abiVersion"},
		{name: "other major", export: abi.ExportRender, input: `{"abiVersion":"v2"}`, wantErr: `abiVersion "v2"`},
		{name: "validate not implemented", export: abi.ExportValidate, input: `{"abiVersion":"v1"}`, wantErr: "does not implement osm_validate"},
		{name: "encode not implemented", export: abi.ExportEncode, input: `{"abiVersion":"v1"}`, wantErr: "does not implement osm_encode"},
		{name: "unknown export", export: "osm_other", wantErr: `unknown export "osm_other"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Invoke(p, tt.export, []byte(tt.input)); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Invoke() error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	if _, err := Invoke(nil, abi.ExportMetadata, nil); err == nil || !strings.Contains(err.Error(), "guest.Register") {
		t.Errorf("Invoke(nil) error = %v, want a hint to call guest.Register", err)
	}
}

func TestCallValidate(t *testing.T) {
	resp, err := CallValidate(validating{fake{render: echo}}, &abi.ValidateRequest{OSVersion: "24.04"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(resp)
	if want := `{"abiVersion":"v1","errors":[{"field":"spec.osVersion","message":"24.04"}]}`; string(b) != want {
		t.Errorf("response = %s, want %s", b, want)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	mu.Lock()
	saved := registered
	registered = nil
	mu.Unlock()
	defer func() { mu.Lock(); registered = saved; mu.Unlock() }()

	Register(fake{render: echo})
	defer func() {
		if recover() == nil {
			t.Error("second Register did not panic")
		}
	}()
	Register(fake{render: echo})
}
