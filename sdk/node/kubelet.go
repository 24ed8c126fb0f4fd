package node

import (
	"encoding/json"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// Kubelet defaults where the MachineDeployment's kubelet-config annotations set nothing. They are upstream
// OSM's, so nodes get the same reservations and eviction thresholds after a switch to OSM.
var (
	defaultReserved     = map[string]string{"cpu": "200m", "ephemeral-storage": "1Gi", "memory": "200Mi"}
	defaultEvictionHard = map[string]string{"imagefs.available": "15%", "memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"}
	// tlsCipherSuites are the TLS 1.2 suites without known weaknesses plus the TLS 1.3 ones.
	tlsCipherSuites = []string{
		"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
		"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
		"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
	}
)

// kubeletConfiguration is the subset of kubelet.config.k8s.io/v1beta1 KubeletConfiguration OSM sets, in the
// order it is written. It is marshalled as JSON, which the kubelet reads as the YAML it is.
type kubeletConfiguration struct {
	APIVersion                  string            `json:"apiVersion"`
	Kind                        string            `json:"kind"`
	Authentication              kubeletAuthn      `json:"authentication"`
	Authorization               kubeletAuthz      `json:"authorization"`
	CgroupDriver                string            `json:"cgroupDriver"`
	ClusterDNS                  []string          `json:"clusterDNS,omitempty"`
	ClusterDomain               string            `json:"clusterDomain"`
	ContainerLogMaxFiles        int32             `json:"containerLogMaxFiles"`
	ContainerLogMaxSize         string            `json:"containerLogMaxSize"`
	ContainerRuntimeEndpoint    string            `json:"containerRuntimeEndpoint,omitempty"`
	EvictionHard                map[string]string `json:"evictionHard"`
	FeatureGates                map[string]bool   `json:"featureGates,omitempty"`
	ImageGCHighThresholdPercent *int32            `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent  *int32            `json:"imageGCLowThresholdPercent,omitempty"`
	ImageMaximumGCAge           string            `json:"imageMaximumGCAge,omitempty"`
	ImageMinimumGCAge           string            `json:"imageMinimumGCAge,omitempty"`
	KubeReserved                map[string]string `json:"kubeReserved"`
	MaxParallelImagePulls       *int32            `json:"maxParallelImagePulls,omitempty"`
	MaxPods                     *int32            `json:"maxPods,omitempty"`
	ProtectKernelDefaults       bool              `json:"protectKernelDefaults"`
	ReadOnlyPort                int32             `json:"readOnlyPort"`
	ResolvConf                  string            `json:"resolvConf"`
	RotateCertificates          bool              `json:"rotateCertificates"`
	SerializeImagePulls         bool              `json:"serializeImagePulls"`
	ServerTLSBootstrap          bool              `json:"serverTLSBootstrap"`
	StaticPodPath               string            `json:"staticPodPath"`
	SystemReserved              map[string]string `json:"systemReserved"`
	TLSCipherSuites             []string          `json:"tlsCipherSuites"`
	VolumePluginDir             string            `json:"volumePluginDir"`
}

type kubeletAuthn struct {
	Anonymous struct {
		Enabled bool `json:"enabled"`
	} `json:"anonymous"`
	Webhook struct {
		CacheTTL string `json:"cacheTTL"`
		Enabled  bool   `json:"enabled"`
	} `json:"webhook"`
	X509 struct {
		ClientCAFile string `json:"clientCAFile"`
	} `json:"x509"`
}

type kubeletAuthz struct {
	Mode    string `json:"mode"`
	Webhook struct {
		CacheAuthorizedTTL   string `json:"cacheAuthorizedTTL"`
		CacheUnauthorizedTTL string `json:"cacheUnauthorizedTTL"`
	} `json:"webhook"`
}

// KubeletConfig returns /etc/kubernetes/kubelet.conf for the request.
func KubeletConfig(r *Request) string { return kubeletConfig(r).json() }

func kubeletConfig(r *Request) *kubeletConfiguration {
	kc := r.Ctx.Kubelet.Config
	c := kubeletConfiguration{
		APIVersion:                  "kubelet.config.k8s.io/v1beta1",
		Kind:                        "KubeletConfiguration",
		CgroupDriver:                "systemd",
		ClusterDNS:                  r.Ctx.Cluster.DNSIPs,
		ClusterDomain:               orDefault(r.Ctx.Cluster.Domain, "cluster.local"),
		ContainerLogMaxFiles:        5,
		ContainerLogMaxSize:         orDefault(kc.ContainerLogMaxSize, "100Mi"),
		EvictionHard:                orDefaultMap(kc.EvictionHard, defaultEvictionHard),
		FeatureGates:                r.Ctx.Kubelet.FeatureGates,
		ImageGCHighThresholdPercent: kc.ImageGCHighThresholdPercent,
		ImageGCLowThresholdPercent:  kc.ImageGCLowThresholdPercent,
		ImageMaximumGCAge:           kc.ImageMaximumGCAge,
		ImageMinimumGCAge:           kc.ImageMinimumGCAge,
		KubeReserved:                orDefaultMap(kc.KubeReserved, defaultReserved),
		MaxPods:                     kc.MaxPods,
		// The kubelet refuses to start unless the sysctls it would otherwise change already have its values;
		// the sysctl file of the provisioning stage sets them.
		ProtectKernelDefaults: true,
		ReadOnlyPort:          0,
		// osm-setup points this link at systemd-resolved's upstream servers where resolved runs, else at
		// /etc/resolv.conf: pods must never get the 127.0.0.53 stub.
		ResolvConf:          KubeletResolvConfPath,
		RotateCertificates:  true,
		SerializeImagePulls: false,
		ServerTLSBootstrap:  true,
		StaticPodPath:       StaticPodPath,
		SystemReserved:      orDefaultMap(kc.SystemReserved, defaultReserved),
		TLSCipherSuites:     tlsCipherSuites,
		VolumePluginDir:     "/var/lib/kubelet/volumeplugins",
	}
	if kc.ContainerLogMaxFiles != nil {
		c.ContainerLogMaxFiles = *kc.ContainerLogMaxFiles
	}
	c.Authentication.Webhook.Enabled = true
	c.Authentication.Webhook.CacheTTL = "2m0s"
	c.Authentication.X509.ClientCAFile = CACertPath
	c.Authorization.Mode = "Webhook"
	c.Authorization.Webhook.CacheAuthorizedTTL = "5m0s"
	c.Authorization.Webhook.CacheUnauthorizedTTL = "30s"
	// The config field replaced the --container-runtime-endpoint flag in 1.27, as did parallel image pulls.
	if r.Kube.AtLeast(1, 27) {
		c.ContainerRuntimeEndpoint = ContainerdSocket
		pulls := int32(10)
		c.MaxParallelImagePulls = &pulls
	}
	return &c
}

// json is c as the kubelet reads its config file: indented JSON.
func (c *kubeletConfiguration) json() string { return indentedJSON(c) }

// KubeletFlags are the kubelet's command line flags for the request, one per element.
func KubeletFlags(r *Request) []string {
	cp := r.Ctx.CloudProvider
	flags := []string{
		"--bootstrap-kubeconfig=" + BootstrapKubeconfigPath,
		"--kubeconfig=" + KubeconfigPath,
		"--config=" + KubeletConfigPath,
		"--cert-dir=" + KubeletCertDir,
	}
	if !r.Kube.AtLeast(1, 27) {
		flags = append(flags, "--container-runtime-endpoint="+ContainerdSocket)
	}
	switch {
	case cp.External:
		flags = append(flags, "--cloud-provider=external")
	case cp.InTreeName != "" && !r.Kube.AtLeast(1, 29):
		// Kubernetes 1.29 removed the in-tree cloud providers from the kubelet.
		flags = append(flags, "--cloud-provider="+cp.InTreeName)
		if cp.HasCloudConfig {
			flags = append(flags, "--cloud-config="+CloudConfigPath)
		}
	}
	if hostnameOverride(r) {
		flags = append(flags, "--hostname-override=${KUBELET_HOSTNAME}")
	}
	if t := r.Ctx.Kubelet.InitialTaints; t != "" {
		flags = append(flags, "--register-with-taints="+t)
	}
	// A cloud provider (in-tree or external) reports the addresses of a dual-stack node itself; a node IP would
	// pin it to one family.
	if !r.DualStack() || (!cp.External && cp.InTreeName == "") {
		flags = append(flags, "--node-ip=${KUBELET_NODE_IP}")
	}
	return flags
}

// hostnameOverride reports whether the kubelet registers under the machine's name. On AWS without an external
// cloud provider the in-tree provider requires the private DNS name the kubelet finds itself, and OpenStack
// machines are named after their instance already; everywhere else the name comes from /etc/machine-name.
func hostnameOverride(r *Request) bool {
	switch r.Provider() {
	case "aws":
		return r.Ctx.CloudProvider.External
	case "openstack":
		return false
	}
	return true
}

// KubeletService is kubelet.service. It waits for osm-setup (which installs the binaries) and recomputes the node
// IP and name before every start, so a changed address after a reboot is picked up.
func KubeletService(r *Request) abi.Unit {
	var b strings.Builder
	b.WriteString(`[Unit]
Description=kubelet: the Kubernetes node agent
Documentation=https://kubernetes.io/docs/reference/command-line-tools-reference/kubelet/
Wants=network-online.target ` + ContainerdUnit + `
After=network-online.target ` + ContainerdUnit + " " + SetupUnit + `
StartLimitIntervalSec=0

[Service]
Restart=always
RestartSec=10
CPUAccounting=true
MemoryAccounting=true
Environment=PATH=` + BinDir + `:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EnvironmentFile=-` + ProxyEnvPath + `
EnvironmentFile=-` + NodeEnvPath + `
# Swap must stay off: some images turn it back on at boot.
ExecStartPre=-/bin/sh -c 'swapoff -a'
ExecStartPre=` + NodeEnvScriptPath + `
ExecStart=` + BinDir + `/kubelet`)
	for _, f := range KubeletFlags(r) {
		b.WriteString(" \\\n  " + f)
	}
	b.WriteString(`

[Install]
WantedBy=multi-user.target
`)
	return unit(KubeletUnit, true, b.String())
}

// BootstrapKubeconfig is the kubelet's TLS bootstrap kubeconfig. The token is the host's placeholder, copied
// verbatim; the host substitutes the real token when it writes the provisioning Secret, which only this
// MachineDeployment's provisioning credential can read.
func BootstrapKubeconfig(r *Request) string {
	type named struct {
		Name    string            `json:"name"`
		Cluster map[string]string `json:"cluster,omitempty"`
		Context map[string]string `json:"context,omitempty"`
		User    map[string]string `json:"user,omitempty"`
	}
	return indentedJSON(struct {
		APIVersion     string  `json:"apiVersion"`
		Kind           string  `json:"kind"`
		Clusters       []named `json:"clusters"`
		Contexts       []named `json:"contexts"`
		CurrentContext string  `json:"current-context"`
		Users          []named `json:"users"`
	}{
		APIVersion: "v1", Kind: "Config", CurrentContext: "default",
		Clusters: []named{{Name: "default", Cluster: map[string]string{"certificate-authority": CACertPath, "server": r.Ctx.Cluster.ServerURL}}},
		Contexts: []named{{Name: "default", Context: map[string]string{"cluster": "default", "user": "kubelet-bootstrap"}}},
		Users:    []named{{Name: "kubelet-bootstrap", User: map[string]string{"token": r.Ctx.Secrets.BootstrapToken}}},
	})
}

// indentedJSON is v as the node's JSON files are written: indented by two spaces, with <, > and & as they are,
// and a final newline.
func indentedJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		panic(err) // strings, booleans, integers and maps of them always encode
	}
	return b.String()
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func orDefaultMap(v, def map[string]string) map[string]string {
	if len(v) == 0 {
		return def
	}
	return v
}
