package node

// Paths and unit names on the node. They are part of the node's interface for operators (logs, debugging,
// template overrides), so they are stable and share the osm- prefix.
const (
	// CACertPath is the cluster CA. The bootstrap verifies the API server with it and the kubelet uses it.
	CACertPath          = "/etc/kubernetes/pki/ca.crt"
	BootstrapScriptPath = "/opt/bin/osm-bootstrap"
	BootstrapUnit       = "osm-bootstrap.service"
	// BootstrapDone marks a finished bootstrap; the unit's condition stops it from running again.
	BootstrapDone = "/var/lib/osm/bootstrap.done"

	SetupScriptPath = "/opt/bin/osm-setup"
	SetupUnit       = "osm-setup.service"
	SetupDone       = "/var/lib/osm/setup.done"
	// ProvisioningCommandsPath holds provisioning bootcmd/runcmd commands the provisioning utility does not run
	// when the bootstrap hands the configuration over (see OS.UnrunModules); osm-setup runs them last.
	ProvisioningCommandsPath = "/etc/osm/provisioning-commands.sh"

	NodeEnvScriptPath = "/opt/bin/osm-node-env"
	// NodeEnvPath is where osm-node-env writes KUBELET_NODE_IP and KUBELET_HOSTNAME for kubelet.service.
	NodeEnvPath = "/run/osm/kubelet.env"

	HealthScriptPath  = "/opt/bin/osm-health-monitor"
	HealthServiceUnit = "osm-health-monitor.service"
	HealthTimerUnit   = "osm-health-monitor.timer"

	ProxyEnvPath = "/etc/osm/proxy.env"

	KubeletUnit              = "kubelet.service"
	KubeletConfigPath        = "/etc/kubernetes/kubelet.conf"
	BootstrapKubeconfigPath  = "/etc/kubernetes/bootstrap-kubelet.conf"
	KubeconfigPath           = "/var/lib/kubelet/kubeconfig"
	CloudConfigPath          = "/etc/kubernetes/cloud-config"
	KubeletResolvConfPath    = "/etc/kubernetes/resolv.conf"
	KubeletCertDir           = "/etc/kubernetes/pki"
	StaticPodPath            = "/etc/kubernetes/manifests"
	ContainerdUnit           = "containerd.service"
	ContainerdConfigPath     = "/etc/containerd/config.toml"
	ContainerdCertsDir       = "/etc/containerd/certs.d"
	ContainerdSocket         = "unix:///run/containerd/containerd.sock"
	CrictlConfigPath         = "/etc/crictl.yaml"
	ModulesLoadPath          = "/etc/modules-load.d/osm-kubernetes.conf"
	SysctlPath               = "/etc/sysctl.d/90-osm-kubernetes.conf"
	JournaldDropInPath       = "/etc/systemd/journald.conf.d/90-osm.conf"
	ProfilePathScript        = "/etc/profile.d/osm-path.sh"
	BinDir                   = "/opt/bin"
	CNIBinDir                = "/opt/cni/bin"
	MachineNamePath          = "/etc/machine-name"
	osmDropIn                = "10-osm.conf"
	cloudInitProvisioningCfg = "/etc/cloud/cloud.cfg.d/99-osm-provisioning.cfg"
)
