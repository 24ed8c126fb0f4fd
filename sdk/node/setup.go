package node

import (
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// FinishProvisioning completes the merged provisioning configuration with the setup script, unless the
// profile's templates provide their own, and with the provisioning commands the provisioning utility will
// not run (see OS.UnrunModules).
//
// It returns what the response's DeferredCommands says (nil when the utility runs every command module), so that
// the host adds the commands of extensions and later plugins to the same script.
func FinishProvisioning(r *Request, cfg *abi.NodeConfig) *abi.DeferredCommands {
	var deferred *abi.DeferredCommands
	if r.OS.UnrunModules != nil {
		if bootcmd, runcmd := r.OS.UnrunModules(r); bootcmd || runcmd {
			deferred = &abi.DeferredCommands{Path: ProvisioningCommandsPath, BootCMD: bootcmd, RunCMD: runcmd}
		}
	}
	commands := unrunCommands(r, cfg)
	if len(commands) > 0 && cfg.File(ProvisioningCommandsPath) == nil {
		cfg.Files = append(cfg.Files, abi.PlainFile(ProvisioningCommandsPath, 0o700, ProvisioningCommandsHeader(r.Utility())+strings.Join(commands, "\n")+"\n"))
	}
	if cfg.File(SetupScriptPath) == nil {
		cfg.Files = append(cfg.Files, abi.PlainFile(SetupScriptPath, 0o700, setupScript(r, cfg, deferred != nil || len(commands) > 0)), ReportScriptFile(r))
	}
	return deferred
}

// ProvisioningCommandsHeader starts the script of ProvisioningCommandsPath.
func ProvisioningCommandsHeader(utility string) string {
	return "#!/bin/sh\n# Provisioning commands of the OperatingSystemConfig that " + utility + " does not run when osm-bootstrap\n" +
		"# applies the configuration; osm-setup runs them once the node is set up.\n"
}

func unrunCommands(r *Request, cfg *abi.NodeConfig) []string {
	if r.OS.UnrunModules == nil || cfg.Modules == nil {
		return nil
	}
	bootcmd, runcmd := r.OS.UnrunModules(r)
	var out []string
	if bootcmd {
		out = append(out, cfg.Modules.BootCMD...)
	}
	if runcmd {
		out = append(out, cfg.Modules.RunCMD...)
	}
	return out
}

// setupScript is osm-setup: everything that has to run on the machine, in order. It is idempotent, because
// osm-setup.service restarts it after a failure (a mirror that is down, a package lock held by the image's
// own first-boot updates).
func setupScript(r *Request, cfg *abi.NodeConfig, hasCommands bool) string {
	s := NewScript("osm-setup", "provision this machine as a Kubernetes node.")
	s.Line("export PATH=" + BinDir + ":$PATH")
	reportSetup(s)

	s.Section("The machine's name from machine-controller, where it provides one.")
	s.Line(`if [ -s ` + MachineNamePath + ` ] && command -v hostnamectl >/dev/null; then hostnamectl set-hostname "$(cat ` + MachineNamePath + `)"; fi`)

	if r.OS.Prepare != nil {
		r.OS.Prepare(r, s)
	}
	if len(ProxyVars(r.Ctx.Proxy)) > 0 {
		s.Section("Proxy settings for login shells; services read " + ProxyEnvPath + " directly.")
		s.Line(`if [ -L /etc/environment ]; then cp --remove-destination "$(readlink -f /etc/environment)" /etc/environment 2>/dev/null || rm -f /etc/environment; fi`)
		s.Line(`touch /etc/environment`)
		s.Line(`sed -i -e '/^\(HTTPS\?_PROXY\|https\?_proxy\|NO_PROXY\|no_proxy\)=/d' /etc/environment`)
		s.Line(`cat ` + ProxyEnvPath + ` >>/etc/environment`)
	}
	if r.Ctx.HostCACert != "" {
		s.Section("Trust the controller's extra CA bundle system-wide (" + r.OS.Trust.Path + ").")
		s.Line(r.OS.Trust.Update)
	}

	s.Section("Swap off, now and in fstab; swap.target is masked and the kubelet turns it off before it starts.")
	s.Line("swapoff -a")
	s.Line(`if [ -f /etc/fstab ]; then sed -i -e '/^[^#].*[[:space:]]swap[[:space:]]/s/^/# disabled by OSM: /' /etc/fstab; fi`)

	s.Section("Kernel modules and sysctls of " + ModulesLoadPath + " and " + SysctlPath + ".")
	s.Line("modprobe overlay")
	s.Line("modprobe br_netfilter")
	s.Line(`systemctl restart systemd-modules-load.service || log "some kernel modules of ` + ModulesLoadPath + ` could not be loaded (IPVS?); see journalctl -u systemd-modules-load"`)
	// Other sysctl.d files of the image may hold keys this kernel lacks; only the node's own settings are fatal.
	s.Line(`sysctl --system >/dev/null || log "some sysctls could not be applied; see sysctl --system"`)
	s.Line(`for k in net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables; do`)
	s.Line(`  if [ "$(sysctl -n "$k")" != 1 ]; then log "sysctl $k is not 1"; exit 1; fi`)
	s.Line(`done`)

	s.Section("Pods get the upstream DNS servers: systemd-resolved's list where it runs, else /etc/resolv.conf.")
	s.Line("if [ -s /run/systemd/resolve/resolv.conf ]; then ln -sfn /run/systemd/resolve/resolv.conf " + KubeletResolvConfPath +
		"; else ln -sfn /etc/resolv.conf " + KubeletResolvConfPath + "; fi")

	reportStep(s, "", StepPackages)
	DownloadHelper(s)
	if r.OS.Install != nil {
		// Install has been validated by NewRequest; an error here is a bug in the OS description.
		if err := r.OS.Install(r, s); err != nil {
			panic(err)
		}
	}
	Binaries(r, s)
	reportStep(s, PhasePackagesInstalled, StepContainerRuntime)

	s.Section("containerd with the configuration written by OSM; it must come up with the CRI plugin.")
	s.Line("systemctl daemon-reload")
	s.Line("systemctl enable " + ContainerdUnit)
	s.Line("systemctl restart " + ContainerdUnit)
	s.Raw(`for i in $(seq 1 30); do
  if crictl --runtime-endpoint ` + ContainerdSocket + ` info >/dev/null 2>&1; then break; fi
  if [ "$i" = 30 ]; then
    log "containerd does not serve the CRI with ` + ContainerdConfigPath + ` (OSM writes a version 3 configuration, which needs containerd 2.0 or newer); see journalctl -u containerd"
    exit 1
  fi
  sleep 2
done
`)
	reportStep(s, PhaseRuntimeUp, StepUnits)

	activation(s, cfg)
	if hasCommands {
		// The host may add the script after the plugin rendered (commands of extensions), so osm-setup looks for it.
		s.Section("Provisioning commands of the profile and its extensions.")
		s.Line(`if [ -f ` + ProvisioningCommandsPath + ` ]; then ` + ProvisioningCommandsPath + ` || log "the provisioning commands of ` + ProvisioningCommandsPath + ` failed (exit $?)"; fi`)
	}
	s.Section("Done; " + SetupUnit + " does not run again.")
	s.Line("mkdir -p " + dir(SetupDone))
	s.Line("touch " + SetupDone)
	s.Line(`log "this machine is provisioned; the kubelet joins the cluster"`)
	reportJoin(s)
	return s.String()
}

// activation enables, masks and starts the configuration's units, in their order. A provisioning utility
// that applies the configuration at first boot (Ignition) has done this already, and doing it again is
// harmless; cloud-init's init stage, which the bootstrap uses, writes the unit files but leaves the rest to
// runcmd, which it does not run. Starts do not block: the kubelet is ordered after osm-setup, which is still
// running here.
func activation(s *Script, cfg *abi.NodeConfig) {
	var masked, enabled, started, restarted []string
	for _, u := range cfg.Units {
		switch {
		case u.Mask != nil && *u.Mask:
			masked = append(masked, u.Name)
		case u.Enable != nil && *u.Enable:
			enabled = append(enabled, u.Name)
			if u.Name != SetupUnit {
				started = append(started, u.Name)
			}
		case len(u.DropIns) > 0 && (u.Content == nil || *u.Content == ""):
			// A drop-in for a unit of the OS applies on its next start.
			restarted = append(restarted, u.Name)
		}
	}
	s.Section("Units of the configuration.")
	s.Line("systemctl daemon-reload")
	if len(masked) > 0 {
		s.Line("systemctl mask " + quoteAll(masked))
		s.Line("systemctl stop " + quoteAll(masked) + " 2>/dev/null || true")
	}
	if len(enabled) > 0 {
		s.Line("systemctl enable " + quoteAll(enabled))
	}
	if len(restarted) > 0 {
		s.Line("systemctl --no-block try-restart " + quoteAll(restarted))
	}
	if len(started) > 0 {
		s.Line("systemctl --no-block start " + quoteAll(started))
	}
}

// quoteAll quotes each unit name: names of template units carry backslash escapes such as \x2d.
func quoteAll(names []string) string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if strings.Trim(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@") == "" {
			out = append(out, n)
		} else {
			out = append(out, Quote(n))
		}
	}
	return strings.Join(out, " ")
}
