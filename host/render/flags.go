package render

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/osmhq/osm/host/containerd"
)

// NodeFlags binds the node settings to command-line flags with upstream OSM's names and defaults, so the
// controller and osmctl accept the same flags. Call Settings after parsing.
type NodeFlags struct {
	clusterDNS            string
	containerRuntime      string
	externalCloudProvider bool
	pauseImage            string
	initialTaints         string
	httpProxy             string
	noProxy               string
	registries            containerd.RegistryFlags
	featureGates          string
	kubernetesCABundle    string
	hostCABundle          string
	overrideAPIServer     string
	binaryBaseURL         string
}

// AddFlags registers the flags on fs.
func (f *NodeFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.clusterDNS, "cluster-dns", DefaultClusterDNS, "Comma-separated cluster DNS service IPs the kubelet uses.")
	fs.StringVar(&f.containerRuntime, "container-runtime", DefaultContainerRuntime, "Container runtime on nodes; only containerd is supported.")
	fs.BoolVar(&f.externalCloudProvider, "external-cloud-provider", false, "Run the kubelet with --cloud-provider=external.")
	fs.StringVar(&f.pauseImage, "pause-image", "", "Sandbox (pause) image for containerd; empty keeps containerd's default.")
	fs.StringVar(&f.initialTaints, "initial-taints", "", "Taints nodes register with, e.g. key=value:NoSchedule.")
	fs.StringVar(&f.httpProxy, "node-http-proxy", "", "HTTP(S) proxy for nodes.")
	fs.StringVar(&f.noProxy, "node-no-proxy", DefaultNoProxy, "NO_PROXY for nodes.")
	f.registries.AddFlags(fs)
	fs.StringVar(&f.featureGates, "node-kubelet-feature-gates", "RotateKubeletServerCertificate=true", "Kubelet feature gates, as Gate=true,Other=false.")
	fs.StringVar(&f.kubernetesCABundle, "kubernetes-ca-bundle", "", "File with the cluster CA nodes verify the API server with; default: from kube-public/cluster-info.")
	fs.StringVar(&f.hostCABundle, "host-ca-bundle", "", "File with extra CA certificates nodes trust system-wide.")
	fs.StringVar(&f.overrideAPIServer, "override-bootstrap-kubelet-apiserver", "", "API server URL nodes use, instead of the one in kube-public/cluster-info.")
	fs.StringVar(&f.binaryBaseURL, "node-binary-base-url", DefaultBinaryBaseURL, "Where nodes download kubelet, kubeadm and kubectl (same layout as dl.k8s.io); point it at a mirror for air-gapped sites.")
}

// Settings returns the parsed settings, on top of base (which provides the values that are not flags here).
func (f *NodeFlags) Settings(base Settings) (Settings, error) {
	s := base
	var err error
	if s.ClusterDNSIPs, err = parseIPs(f.clusterDNS); err != nil {
		return s, fmt.Errorf("-cluster-dns: %w", err)
	}
	s.ContainerRuntime = f.containerRuntime
	if s.ContainerRuntime != DefaultContainerRuntime {
		return s, fmt.Errorf("-container-runtime: %q is not supported; only containerd is", s.ContainerRuntime)
	}
	s.ExternalCloudProvider = f.externalCloudProvider
	s.PauseImage = f.pauseImage
	s.InitialTaints = f.initialTaints
	s.HTTPProxy = f.httpProxy
	s.NoProxy = f.noProxy
	var reg containerd.Options
	if err := f.registries.Apply(&reg); err != nil {
		return s, err
	}
	s.InsecureRegistries, s.RegistryMirrors, s.ContainerdRegistryMirrors = reg.InsecureRegistries, reg.RegistryMirrors, reg.ContainerdRegistryMirrors
	s.DeviceOwnershipFromSecurityContext = reg.DeviceOwnershipFromSecurityContext
	if s.KubeletFeatureGates, err = parseFeatureGates(f.featureGates); err != nil {
		return s, fmt.Errorf("-node-kubelet-feature-gates: %w", err)
	}
	if f.kubernetesCABundle != "" {
		data, err := os.ReadFile(f.kubernetesCABundle)
		if err != nil {
			return s, fmt.Errorf("-kubernetes-ca-bundle: %w", err)
		}
		s.KubernetesCACert = string(data)
	}
	if f.hostCABundle != "" {
		data, err := os.ReadFile(f.hostCABundle)
		if err != nil {
			return s, fmt.Errorf("-host-ca-bundle: %w", err)
		}
		s.HostCACert = string(data)
	}
	s.OverrideBootstrapKubeletAPIServer = f.overrideAPIServer
	s.BinaryBaseURL = strings.TrimSuffix(f.binaryBaseURL, "/")
	return s, nil
}

func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func parseIPs(s string) ([]net.IP, error) {
	var ips []net.IP
	for _, item := range splitList(s) {
		ip := net.ParseIP(item)
		if ip == nil {
			return nil, fmt.Errorf("%q is not an IP address", item)
		}
		ips = append(ips, ip)
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("at least one IP is required")
	}
	return ips, nil
}

// parseFeatureGates reads Gate=bool pairs. RotateKubeletServerCertificate is always on unless set explicitly,
// as upstream does: nodes serve with certificates the cluster signs.
func parseFeatureGates(s string) (map[string]bool, error) {
	gates := map[string]bool{}
	for _, item := range splitList(s) {
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not Gate=true|false", item)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q is not Gate=true|false", item)
		}
		gates[strings.TrimSpace(k)] = b
	}
	if _, ok := gates["RotateKubeletServerCertificate"]; !ok {
		gates["RotateKubeletServerCertificate"] = true
	}
	return gates, nil
}
