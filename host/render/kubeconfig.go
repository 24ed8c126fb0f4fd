package render

import (
	"sync/atomic"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// BootstrapKubeconfig is the kubeconfig the kubelet uses for TLS bootstrapping: the cluster's server and CA and
// a bootstrap token. Names follow upstream ("c" for cluster, user and context).
func BootstrapKubeconfig(serverURL, caCert, token string) string {
	key := kubeconfigKey{serverURL, caCert, token}
	if last := lastKubeconfig.Load(); last != nil && last.key == key {
		return last.out
	}
	out := bootstrapKubeconfig(serverURL, caCert, token)
	lastKubeconfig.Store(&kubeconfigMemo{key, out})
	return out
}

// lastKubeconfig remembers the last kubeconfig written. Every MachineDeployment's template data holds one
// with the same server, CA and token placeholder, and writing it (clientcmd's JSON, then YAML) was 8% of the
// bytes the controller allocated in a 500-MachineDeployment start.
var lastKubeconfig atomic.Pointer[kubeconfigMemo]

type kubeconfigKey struct{ server, ca, token string }

type kubeconfigMemo struct {
	key kubeconfigKey
	out string
}

func bootstrapKubeconfig(serverURL, caCert, token string) string {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: serverURL, CertificateAuthorityData: []byte(caCert)}
	cfg.AuthInfos["c"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "c"}
	cfg.CurrentContext = "c"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		// Write only fails for types the scheme does not know; a Config always encodes.
		panic(err)
	}
	return string(data)
}
