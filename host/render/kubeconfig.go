package render

import (
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// BootstrapKubeconfig is the kubeconfig the kubelet uses for TLS bootstrapping: the cluster's server and CA and
// a bootstrap token. Names follow upstream ("c" for cluster, user and context).
func BootstrapKubeconfig(serverURL, caCert, token string) string {
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
