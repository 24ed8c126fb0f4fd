package containerd_test

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"

	"github.com/osmhq/osm/host/containerd"
)

// upstreamConfig is upstream OSM's config.toml for the flags of its golden tests (pause image
// 192.168.100.100:5000/kubernetes/pause:v3.1); see crds/testdata/upstream/golden.
const upstreamConfig = `version = 3

[metrics]
address = "127.0.0.1:1338"

[plugins]
[plugins."io.containerd.cri.v1.images"]
discard_unpacked_layers = false
[plugins."io.containerd.cri.v1.images".pinned_images]
sandbox = "192.168.100.100:5000/kubernetes/pause:v3.1"
[plugins."io.containerd.cri.v1.images".registry]
config_path = "/etc/containerd/certs.d"
[plugins."io.containerd.cri.v1.runtime"]
device_ownership_from_security_context = false
[plugins."io.containerd.cri.v1.runtime".containerd]
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes]
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
SystemdCgroup = true
[plugins."io.containerd.cri.v1.runtime".cni]
bin_dirs = ["/opt/cni/bin"]
conf_dir = "/etc/cni/net.d"
`

func TestConfigMatchesUpstream(t *testing.T) {
	got, err := containerd.ConfigTOML(containerd.Options{PauseImage: "192.168.100.100:5000/kubernetes/pause:v3.1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(upstreamConfig, got); diff != "" {
		t.Errorf("config.toml (-upstream +ours):\n%s", diff)
	}
}

func TestRegistryAuth(t *testing.T) {
	auths, err := containerd.ParseDockerConfig([]byte(`{"auths":{"https://index.docker.io/v1/":{"auth":"dXNlcjpwYXNz"},"quay.example.com":{"username":"robot","password":"s3cr3t"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := containerd.AuthTOML(auths)
	if err != nil {
		t.Fatal(err)
	}
	want := `[plugins."io.containerd.cri.v1.images".registry.configs."docker.io".auth]
username = "user"
password = "pass"
auth = "dXNlcjpwYXNz"
[plugins."io.containerd.cri.v1.images".registry.configs."quay.example.com".auth]
username = "robot"
password = "s3cr3t"
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("auth tables (-want +got):\n%s", diff)
	}
	// The whole config with credentials substituted must still be one valid TOML document.
	base, _ := containerd.ConfigTOML(containerd.Options{AuthPlaceholder: "__AUTH__"})
	full := strings.Replace(base, "__AUTH__", got, 1)
	var doc map[string]any
	if _, err := toml.Decode(full, &doc); err != nil {
		t.Fatalf("config with credentials is not valid TOML: %v\n%s", err, full)
	}
	if _, err := containerd.ParseDockerConfig([]byte("not json")); err == nil {
		t.Error("garbage accepted as docker config")
	}
}
