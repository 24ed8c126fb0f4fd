package main

import (
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
)

func TestRenderAddsSiteSettings(t *testing.T) {
	in := abi.NodeConfig{
		Units:   []abi.Unit{{Name: "containerd.service", Enable: new(bool)}},
		Modules: &abi.Modules{RunCMD: []string{"systemctl enable --now osm-setup.service"}},
	}
	resp, err := Plugin{}.Render(&abi.RenderRequest{Stage: abi.StageProvisioning, Input: in, Config: map[string]string{
		"caBundle":   "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
		"ntpServers": "ntp1.site.example, 10.0.0.1",
		"sysctls":    "vm.max_map_count=262144 net.core.somaxconn=4096",
		"packages":   "nfs-common",
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := resp.Config
	for path, want := range map[string]string{
		caPath:     "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
		ntpPath:    "[Time]\nNTP=ntp1.site.example 10.0.0.1\n",
		sysctlPath: "vm.max_map_count = 262144\nnet.core.somaxconn = 4096\n",
	} {
		f := cfg.File(path)
		if f == nil || f.Content.Inline.Data != want || *f.Permissions != 644 {
			t.Errorf("%s = %+v, want %q with mode 644", path, f, want)
		}
	}
	if u := cfg.Unit("containerd.service"); u == nil || len(u.DropIns) != 1 || !strings.Contains(u.DropIns[0].Content, "update-ca-certificates") {
		t.Errorf("containerd.service = %+v, want the CA drop-in on the profile's unit", u)
	}
	want := []string{"systemctl enable --now osm-setup.service", "systemctl try-restart systemd-timesyncd.service", "sysctl --system",
		"DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nfs-common"}
	if got := cfg.Modules.RunCMD; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("runcmd = %q, want %q", got, want)
	}
	boot, err := Plugin{}.Render(&abi.RenderRequest{Stage: abi.StageBootstrap, Input: in, Config: map[string]string{"packages": "x"}})
	if err != nil || len(boot.Config.Files) != 0 {
		t.Errorf("the bootstrap stage changed: %+v %v", boot, err)
	}
}

func TestConfigIsChecked(t *testing.T) {
	for _, bad := range []map[string]string{
		{"caBundle": "not a certificate"},
		{"ntpServers": "ntp.example; rm -rf /"},
		{"sysctls": "vm.swappiness"},
		{"sysctls": "a=b\nc"},
		{"packages": "nfs-common;reboot"},
	} {
		if _, err := (Plugin{}).Render(&abi.RenderRequest{Stage: abi.StageProvisioning, Config: bad}); err == nil {
			t.Errorf("config %v accepted", bad)
		}
		resp, err := Plugin{}.Validate(&abi.ValidateRequest{Config: bad})
		if err != nil || len(resp.Errors) == 0 {
			t.Errorf("validate %v: %+v %v", bad, resp, err)
		}
	}
}
