package node

import (
	"fmt"
	"slices"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// Plugin is a complete Linux node plugin: the kit's stages driven by one OS description. It implements
// guest.Plugin and guest.Validator; register it from the plugin's init with guest.Register(node.New(os)).
type Plugin struct {
	OS *OS
}

// New returns the plugin for os.
func New(os *OS) *Plugin { return &Plugin{OS: os} }

// Metadata describes the plugin to the controller.
func (p *Plugin) Metadata() abi.Metadata {
	return abi.Metadata{
		Name:                  p.OS.Name,
		Version:               p.OS.PluginVersion,
		Description:           p.OS.Description,
		OperatingSystems:      []abi.OperatingSystem{{Name: p.OS.Name, Versions: p.OS.Versions}},
		ProvisioningUtilities: p.OS.Utilities,
		CloudProviders:        p.OS.CloudProviders,
		ConfigSchema:          Schema(p.OS.AllOptions()),
		SSHUser:               p.OS.SSHUser,
	}
}

// Render returns the stage's configuration: the plugin's own files, units and modules with the profile's
// template output applied on top (see Merge), so that templates stay the operator's customization point.
func (p *Plugin) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	r, err := NewRequest(p.OS, req)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(p.OS.Utilities, r.Utility()) {
		return nil, fmt.Errorf("plugin %s does not render for provisioning utility %q: use one of %s", p.OS.Name, r.Utility(), strings.Join(p.OS.Utilities, ", "))
	}
	var own *abi.NodeConfig
	switch req.Stage {
	case abi.StageBootstrap:
		own, err = Bootstrap(r)
	case abi.StageProvisioning:
		own, err = Provisioning(r)
	default:
		return nil, fmt.Errorf("unknown stage %q: the host asks for %q or %q", req.Stage, abi.StageBootstrap, abi.StageProvisioning)
	}
	if err != nil {
		return nil, err
	}
	cfg := Merge(own, &req.Input)
	resp := &abi.RenderResponse{}
	if req.Stage == abi.StageProvisioning {
		resp.DeferredCommands = FinishProvisioning(r, cfg)
	}
	resp.Config = *cfg
	return resp, nil
}

// Validate checks a profile at admission time: its plugin config, OS version, provisioning utility and cloud
// providers.
func (p *Plugin) Validate(req *abi.ValidateRequest) (*abi.ValidateResponse, error) {
	resp := &abi.ValidateResponse{Errors: CheckConfig(p.OS.AllOptions(), req.Config)}
	md := p.Metadata()
	if req.OSName != "" && req.OSName != p.OS.Name {
		resp.Errors = append(resp.Errors, abi.FieldError{Field: "spec.osName",
			Message: fmt.Sprintf("plugin %s renders %s, not %s: use the plugin for %s or set osName to %s", p.OS.Name, p.OS.Name, req.OSName, req.OSName, p.OS.Name)})
	}
	if !md.SupportsOS(p.OS.Name, req.OSVersion) {
		resp.Errors = append(resp.Errors, abi.FieldError{Field: "spec.osVersion",
			Message: fmt.Sprintf("%s %s is not supported by plugin %s: use one of %s", p.OS.Name, req.OSVersion, p.OS.Name, strings.Join(p.OS.Versions, ", "))})
	}
	if u := req.ProvisioningUtility; u != "" && !md.SupportsUtility(u) {
		resp.Errors = append(resp.Errors, abi.FieldError{Field: "spec.provisioningUtility",
			Message: fmt.Sprintf("%q is not supported by plugin %s: use one of %s", u, p.OS.Name, strings.Join(p.OS.Utilities, ", "))})
	}
	for i, cp := range req.CloudProviders {
		if !md.SupportsCloudProvider(cp) {
			resp.Errors = append(resp.Errors, abi.FieldError{Field: fmt.Sprintf("spec.supportedCloudProviders[%d].name", i),
				Message: fmt.Sprintf("cloud provider %q is not supported by plugin %s: use one of %s", cp, p.OS.Name, strings.Join(p.OS.CloudProviders, ", "))})
		}
	}
	return resp, nil
}
