package clusterinfo

import (
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestFromKubeconfigTrimsTheServersTrailingSlash(t *testing.T) {
	for _, server := range []string{"https://10.0.0.1:6443", "https://10.0.0.1:6443/", "https://10.0.0.1:6443//"} {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte("ca")}
		data, err := clientcmd.Write(*cfg)
		if err != nil {
			t.Fatal(err)
		}
		info, err := fromKubeconfig(string(data))
		if err != nil {
			t.Fatal(err)
		}
		if info.ServerURL != "https://10.0.0.1:6443" || info.CACert != "ca" {
			t.Errorf("server %q: got %+v", server, info)
		}
	}
}
