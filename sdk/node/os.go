package node

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// OS describes a distribution: its metadata and the few things that differ between distributions. The shared
// logic in this package calls the hooks at fixed points; a nil hook means "nothing to do here".
type OS struct {
	// Name is the plugin name and the OSP osName, e.g. "ubuntu".
	Name string
	// PluginVersion is the plugin's own semantic version, e.g. "v1.0.0" (Metadata.Version).
	PluginVersion string
	// Description is one line for humans (Metadata.Description).
	Description string
	// Versions are the OS versions the plugin renders for ("9.*" matches a prefix).
	Versions []string
	// Utilities are the provisioning utilities the plugin renders for.
	Utilities []string
	// CloudProviders are the machine-controller providers the plugin supports.
	CloudProviders []string
	// Options are the OS-specific keys of the plugin config, after CommonOptions.
	Options []Option

	// Trust is where the controller's extra CA bundle (-host-ca-bundle) goes.
	Trust Trust
	// Firewall is the unit of the distribution's host firewall (ufw.service, firewalld.service), masked on
	// every node: kube-proxy and the CNI manage the packet filter, and these firewalls drop pod traffic by
	// default. Empty: the image runs no firewall service.
	Firewall string
	// Network writes a static network configuration in the bootstrap stage; nil means the OS plugin does not
	// support one and refuses machines that ask for it.
	Network func(r *Request, cfg *abi.NodeConfig, s *Script) error
	// Handoff writes the end of the bootstrap script: give the fetched configuration (in $cfg) to the
	// provisioning utility.
	Handoff func(r *Request, s *Script)
	// BootstrapFetchTarget is where the bootstrap writes the fetched configuration.
	BootstrapFetchTarget func(r *Request) string
	// BootstrapPrepare writes bootstrap steps that must run before the fetch (e.g. DNS fixes).
	BootstrapPrepare func(r *Request, cfg *abi.NodeConfig, s *Script)

	// Prepare writes the first setup steps: firewall, SELinux, services that get in the way.
	Prepare func(r *Request, s *Script)
	// Install writes the setup steps that install OS packages and the container runtime. It runs after
	// DownloadHelper, so it may use `download URL FILE [SUMURL]`, $arch and $tmp.
	Install func(r *Request, s *Script) error
	// Provisioning adds OS-specific files and units to the plugin's provisioning configuration.
	Provisioning func(r *Request, cfg *abi.NodeConfig) error
	// Hostname writes shell that sets $name to the node's host name when /etc/machine-name is empty; nil uses
	// `hostname -f`.
	Hostname func(r *Request, s *Script)
	// UnrunModules reports which provisioning modules the provisioning utility will not run when the bootstrap
	// hands the configuration over, so that osm-setup runs them instead.
	UnrunModules func(r *Request) (bootcmd, runcmd bool)
}

// Trust is a distribution's system CA trust store.
type Trust struct {
	// Path is the file the extra CA bundle is written to.
	Path string
	// Update rebuilds the trust store.
	Update string
}

// Request is a render request with what every step needs already parsed.
type Request struct {
	*abi.RenderRequest
	OS *OS
	// Ctx is the request's render context.
	Ctx *abi.RenderContext
	// Config is the plugin config with defaults.
	Config map[string]string
	// Kube is the kubelet version.
	Kube KubeVersion
	// Flatcar holds the Flatcar settings of the MachineDeployment's operatingSystemSpec (zero elsewhere).
	Flatcar FlatcarSpec
}

// FlatcarSpec is machine-controller's Flatcar operatingSystemSpec.
type FlatcarSpec struct {
	DisableAutoUpdate   bool `json:"disableAutoUpdate"`
	DisableLocksmithD   bool `json:"disableLocksmithD"`
	DisableUpdateEngine bool `json:"disableUpdateEngine"`
}

// Provider is the machines' cloud provider.
func (r *Request) Provider() string { return r.Ctx.CloudProvider.Name }

// Utility is the provisioning utility being rendered for.
func (r *Request) Utility() string {
	if r.ProvisioningUtility == "" {
		return abi.UtilityCloudInit
	}
	return r.ProvisioningUtility
}

// IPFamily is the machines' IP family, IPv4 by default.
func (r *Request) IPFamily() string {
	if r.Ctx.Network.IPFamily == "" {
		return "IPv4"
	}
	return r.Ctx.Network.IPFamily
}

// DualStack reports whether the machines have both IPv4 and IPv6 addresses.
func (r *Request) DualStack() bool {
	f := r.IPFamily()
	return f == "IPv4+IPv6" || f == "IPv6+IPv4"
}

// HasIPv6 reports whether the machines use IPv6 at all.
func (r *Request) HasIPv6() bool { return r.DualStack() || r.IPFamily() == "IPv6" }

// StaticNetwork reports whether the machines need a static address instead of DHCP.
func (r *Request) StaticNetwork() bool {
	return r.Ctx.Network.CIDR != "" || r.Ctx.Network.Gateway != ""
}

// NewRequest checks a render request (plugin config, kubelet version, the cluster fields every stage needs)
// and returns it parsed, with the config's defaults filled in. Plugin.Render calls it; a plugin with its own
// Render calls it to use the kit's building blocks (Bootstrap, Provisioning, KubeletConfig, …) directly.
func NewRequest(os *OS, req *abi.RenderRequest) (*Request, error) {
	opts := os.AllOptions()
	if errs := CheckConfig(opts, req.Config); len(errs) > 0 {
		return nil, fmt.Errorf("plugin config: %s", joinFieldErrors(errs))
	}
	kube, err := ParseKubeVersion(req.Context.Kubelet.Version)
	if err != nil {
		return nil, err
	}
	r := &Request{RenderRequest: req, OS: os, Ctx: &req.Context, Config: WithDefaults(opts, req.Config), Kube: kube}
	if req.Context.OperatingSystem.Name == "flatcar" && len(req.Context.OperatingSystem.Spec) > 0 {
		if err := json.Unmarshal(req.Context.OperatingSystem.Spec, &r.Flatcar); err != nil {
			return nil, fmt.Errorf("operatingSystemSpec is not a Flatcar spec: %w", err)
		}
	}
	c := req.Context.Cluster
	switch {
	case c.ServerURL == "":
		return nil, fmt.Errorf("the render context has no API server URL (context.cluster.serverURL)")
	case c.CACert == "":
		return nil, fmt.Errorf("the render context has no cluster CA (context.cluster.caCert)")
	case c.ProvisioningSecret.Namespace == "" || c.ProvisioningSecret.Name == "" || c.ProvisioningSecret.Key == "":
		return nil, fmt.Errorf("the render context does not name the provisioning Secret (context.cluster.provisioningSecret)")
	}
	return r, nil
}

func joinFieldErrors(errs []abi.FieldError) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, e.Error())
	}
	return strings.Join(parts, "; ")
}

// AllOptions are the common options followed by the OS's own.
func (os *OS) AllOptions() []Option { return append(CommonOptions(), os.Options...) }
