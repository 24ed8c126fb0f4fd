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

	// Trust is where the controller's extra CA bundle (-host-ca-bundle) goes; zero: the OS has no trust store
	// the kit writes to, and machines of a controller with such a bundle are refused.
	Trust Trust
	// SSHUser is the image's user the machine's SSH keys are authorized for, when the host encodes the
	// configuration (abi.Metadata.SSHUser); empty: the utility's default (Ignition: core).
	SSHUser string
	// Firewall is the unit of the distribution's host firewall (ufw.service, firewalld.service), masked on
	// every node: kube-proxy and the CNI manage the packet filter, and these firewalls drop pod traffic by
	// default. Empty: the image runs no firewall service.
	Firewall string

	// The hooks below write shell into the kit's generated scripts, or edit a stage's configuration; nil means
	// "nothing to do here". Every script starts with `set -euo pipefail` and defines `log` (to the journal): a
	// failing command, an unset variable or a failing pipe stops it. plugintest.Check runs the scripts in a
	// sandbox (CheckBootstrapRun, CheckNodeEnv), so a hook that fails there fails on a node; the kit's own
	// tests of each hook are in hooks_test.go.

	// Network writes a static network configuration. It runs only when the MachineDeployment asks for a static
	// address (providerSpec.value.network: Request.StaticNetwork); the files it adds to cfg are in the
	// bootstrap stage, so the provisioning utility writes them before osm-bootstrap starts; its shell runs in
	// osm-bootstrap (root, umask 077, at the first boot) after the proxy is exported and before
	// BootstrapPrepare and the fetch, which needs the network. It replaces nothing: nil makes the kit refuse
	// machines with a static address.
	Network func(r *Request, cfg *abi.NodeConfig, s *Script) error
	// Handoff writes the end of osm-bootstrap, after the fetch: the fetched configuration is in the file $cfg
	// (FetchedConfigPath, on tmpfs); the handoff gives it to the provisioning utility, creates BootstrapDone
	// (the bootstrap unit's condition; without it every boot fetches again) and starts osm-setup or reboots
	// into the utility. Required: CloudInitHandoff, IgnitionHandoff, or the OS's own.
	Handoff func(r *Request, s *Script)
	// BootstrapPrepare writes shell that runs in osm-bootstrap after Network and before the fetch ($cfg is not
	// set yet), at every start of the bootstrap unit until the bootstrap is done, so it must be idempotent
	// (e.g. DNS fixes the fetch needs). It may add files to the bootstrap stage's cfg. It replaces nothing.
	BootstrapPrepare func(r *Request, cfg *abi.NodeConfig, s *Script)

	// Prepare writes the first steps of osm-setup (root, once, restarted after a failure, so idempotent):
	// after the machine's name is set (hostnamectl, from /etc/machine-name) and before the proxy, trust
	// store, swap, kernel modules and sysctls (firewall, SELinux, services that get in the way). It replaces
	// nothing.
	Prepare func(r *Request, s *Script)
	// Install writes the osm-setup steps that install OS packages and the container runtime. It runs after
	// DownloadHelper, so it may use `download URL FILE [SUMURL]`, $arch and $tmp, and before the kit's
	// Kubernetes binaries and containerd's (re)start, which expects a containerd 2.x binary in place
	// afterwards. Like all of osm-setup it must be idempotent. It replaces nothing.
	Install func(r *Request, s *Script) error
	// Provisioning edits the plugin's provisioning configuration (Go, no shell) after the kit built it: add
	// files and units, or change the kit's (cfg.Unit(KubeletUnit)). It runs before the profile's templates are
	// merged on top.
	Provisioning func(r *Request, cfg *abi.NodeConfig) error
	// Hostname writes shell for osm-node-env, which kubelet.service runs as an ExecStartPre before every
	// start (a failure means the kubelet does not start). The script has already set $name to the kit's
	// `hostname -f 2>/dev/null || hostname`; the hook runs only when /etc/machine-name (machine-controller's
	// name for the machine) is empty or missing, and may set $name to something better (an agent's file). It
	// must not fail when what it reads is missing: keep $name then. The machine's name, when there is one,
	// always wins; the name is lower-cased, and an empty one fails the script.
	Hostname func(r *Request, s *Script)
	// UnrunModules reports which provisioning commands (bootcmd, runcmd) the provisioning utility will not run
	// when the bootstrap hands the configuration over; the kit writes them to ProvisioningCommandsPath and
	// osm-setup runs them last (and the response's DeferredCommands tells the host to add its own there).
	// Go, no shell; nil: the utility runs them all.
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
