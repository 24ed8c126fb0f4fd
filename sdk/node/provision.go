package node

import (
	"fmt"
	"io/fs"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// kernelModules are loaded at every boot: overlay for containerd's snapshotter, br_netfilter so bridged pod
// traffic passes iptables, IPVS for kube-proxy's ipvs mode, conntrack for NAT.
var kernelModules = []string{"overlay", "br_netfilter", "ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "nf_conntrack"}

// Provisioning returns the plugin's own provisioning configuration: everything a machine needs to join the
// cluster, except the setup script, which FinishProvisioning adds once the profile's input is merged in
// (the script activates the final set of units).
func Provisioning(r *Request) (*abi.NodeConfig, error) {
	ctx := r.Ctx
	if ctx.ContainerRuntime.Name != "" && ctx.ContainerRuntime.Name != "containerd" {
		return nil, fmt.Errorf("container runtime %q is not supported by plugin %s: use containerd", ctx.ContainerRuntime.Name, r.OS.Name)
	}
	if ctx.ContainerRuntime.Config == "" {
		return nil, fmt.Errorf("the render context has no containerd configuration (context.containerRuntime.config)")
	}
	if ctx.Secrets.BootstrapToken == "" {
		return nil, fmt.Errorf("the render context has no bootstrap token placeholder (context.secrets.bootstrapToken); the kubelet could not join")
	}
	cfg := &abi.NodeConfig{}
	add := func(path string, perm fs.FileMode, content string) {
		cfg.Files = append(cfg.Files, abi.PlainFile(path, perm, content))
	}

	add(CACertPath, 0o644, withNewline(ctx.Cluster.CACert))
	add(BootstrapKubeconfigPath, 0o600, BootstrapKubeconfig(r))
	add(KubeletConfigPath, 0o600, KubeletConfig(r))
	if ctx.CloudProvider.HasCloudConfig {
		add(CloudConfigPath, 0o600, withNewline(ctx.Secrets.CloudConfig))
	}

	// containerd: the host's config.toml verbatim (it may hold the registry-auth placeholder) and a
	// hosts.toml per registry. The host already appends the hosts.toml files to the input; writing them here
	// too keeps the plugin correct for hosts that do not, and Merge keeps one file per path.
	add(ContainerdConfigPath, 0o600, withNewline(ctx.ContainerRuntime.Config))
	for _, reg := range abi.SortedKeys(ctx.ContainerRuntime.HostsTOML) {
		add(ContainerdCertsDir+"/"+reg+"/hosts.toml", 0o600, ctx.ContainerRuntime.HostsTOML[reg])
	}
	add(CrictlConfigPath, 0o644, "runtime-endpoint: "+ContainerdSocket+"\nimage-endpoint: "+ContainerdSocket+"\ntimeout: 10\n")

	add(ModulesLoadPath, 0o644, strings.Join(kernelModules, "\n")+"\n")
	add(SysctlPath, 0o644, sysctls(r))
	add(JournaldDropInPath, 0o644, "[Journal]\nSystemMaxUse="+r.Config[KeyJournalMaxUse]+"\n")
	add(ProfilePathScript, 0o644, "export PATH=\""+BinDir+":$PATH\"\n")
	if proxy := ProxyVars(ctx.Proxy); len(proxy) > 0 {
		var b strings.Builder
		for _, kv := range proxy {
			b.WriteString(kv[0] + "=" + kv[1] + "\n")
		}
		add(ProxyEnvPath, 0o644, b.String())
	}
	if ctx.HostCACert != "" {
		if r.OS.Trust.Path == "" {
			return nil, fmt.Errorf("the controller has an extra CA bundle (-host-ca-bundle) for the nodes, and plugin %s knows no trust store to put it in", r.OS.Name)
		}
		add(r.OS.Trust.Path, 0o644, withNewline(ctx.HostCACert))
	}
	add(NodeEnvScriptPath, 0o755, NodeEnvScript(r))
	add(HealthScriptPath, 0o755, HealthScript)

	containerd := abi.Unit{Name: ContainerdUnit, DropIns: []abi.DropIn{{Name: osmDropIn, Content: `[Service]
Restart=always
LimitNOFILE=1048576
EnvironmentFile=-` + ProxyEnvPath + `
`}}}
	enable := true
	containerd.Enable = &enable
	cfg.Units = append(cfg.Units, containerd, KubeletService(r), setupUnit())
	cfg.Units = append(cfg.Units, HealthUnits()...)
	// Swap must stay off across reboots: the kubelet refuses to run with swap by default.
	cfg.Units = append(cfg.Units, mask("swap.target"))
	if r.OS.Firewall != "" {
		cfg.Units = append(cfg.Units, mask(r.OS.Firewall))
	}

	if r.OS.Provisioning != nil {
		if err := r.OS.Provisioning(r, cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// sysctls are the kernel settings of a node. The panic and overcommit values are the ones the kubelet's
// protectKernelDefaults insists on; the inotify limits are raised for the many watches of pods' volumes.
func sysctls(r *Request) string {
	lines := []string{
		"net.bridge.bridge-nf-call-iptables = 1",
		"net.bridge.bridge-nf-call-ip6tables = 1",
		"net.ipv4.ip_forward = 1",
	}
	if r.HasIPv6() {
		// accept_ra=2 keeps the IPv6 default route learnt from router advertisements while forwarding.
		lines = append(lines, "net.ipv6.conf.all.forwarding = 1", "net.ipv6.conf.all.accept_ra = 2")
	}
	lines = append(lines,
		"kernel.panic = 10",
		"kernel.panic_on_oops = 1",
		"vm.overcommit_memory = 1",
		"fs.inotify.max_user_watches = 1048576",
		"fs.inotify.max_user_instances = 8192",
	)
	return strings.Join(lines, "\n") + "\n"
}

func setupUnit() abi.Unit {
	return unit(SetupUnit, true, `[Unit]
Description=OSM: provision this machine as a Kubernetes node
Wants=network-online.target
After=network-online.target
ConditionPathExists=!`+SetupDone+`
StartLimitIntervalSec=0

[Service]
Type=oneshot
RemainAfterExit=true
EnvironmentFile=-`+ProxyEnvPath+`
ExecStart=`+SetupScriptPath+`
# Downloads and package installs fail transiently; the script is safe to run again.
Restart=on-failure
RestartSec=30
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
`)
}
