package node_test

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/apt"
	"github.com/osmhq/osm/sdk/plugintest"
)

// testPlugin is a Debian-family plugin, which exercises every shared step.
func testPlugin() *node.Plugin {
	os := apt.OS()
	os.Name = "testos"
	os.PluginVersion = "v0.1.0"
	os.Versions = []string{"1"}
	os.CloudProviders = []string{"aws", "azure", "openstack", "vsphere"}
	return node.New(os)
}

func request(stage abi.Stage, edit ...func(*abi.RenderRequest)) *abi.RenderRequest {
	req := plugintest.Request("testos", "1", abi.UtilityCloudInit, "aws", stage)
	for _, e := range edit {
		e(req)
	}
	return req
}

func render(t *testing.T, req *abi.RenderRequest) *abi.NodeConfig {
	t.Helper()
	resp, err := guest.Call(testPlugin(), req)
	if err != nil {
		t.Fatal(err)
	}
	return &resp.Config
}

func file(t *testing.T, cfg *abi.NodeConfig, path string) string {
	t.Helper()
	f := cfg.File(path)
	if f == nil {
		t.Fatalf("no file %s", path)
	}
	return f.Content.Inline.Data
}

func unitContent(t *testing.T, cfg *abi.NodeConfig, name string) string {
	t.Helper()
	u := cfg.Unit(name)
	if u == nil || u.Content == nil {
		t.Fatalf("no unit %s with content", name)
	}
	return *u.Content
}

func TestKubeletFlags(t *testing.T) {
	tests := []struct {
		name      string
		edit      func(*abi.RenderRequest)
		want, not []string
	}{
		{name: "external cloud provider on aws registers under the machine name",
			want: []string{"--cloud-provider=external", "--hostname-override=${KUBELET_HOSTNAME}", "--node-ip=${KUBELET_NODE_IP}"},
			not:  []string{"--container-runtime-endpoint", "--cloud-config", "--register-with-taints"}},
		{name: "in-tree aws keeps the kubelet's own name",
			edit: func(r *abi.RenderRequest) {
				r.Context.CloudProvider = abi.CloudProvider{Name: "aws", InTreeName: "aws"}
			},
			not: []string{"--cloud-provider", "--hostname-override"}},
		{name: "in-tree provider before 1.29 with a cloud-config",
			edit: func(r *abi.RenderRequest) {
				r.Context.Kubelet.Version = "1.28.9"
				r.Context.CloudProvider = abi.CloudProvider{Name: "vsphere", InTreeName: "vsphere", HasCloudConfig: true}
			},
			want: []string{"--cloud-provider=vsphere", "--cloud-config=/etc/kubernetes/cloud-config", "--hostname-override"}},
		{name: "in-tree provider from 1.29 on is not passed",
			edit: func(r *abi.RenderRequest) {
				r.Context.CloudProvider = abi.CloudProvider{Name: "vsphere", InTreeName: "vsphere", HasCloudConfig: true}
			},
			not: []string{"--cloud-provider", "--cloud-config"}},
		{name: "openstack never overrides the host name",
			edit: func(r *abi.RenderRequest) {
				r.Context.CloudProvider = abi.CloudProvider{Name: "openstack", External: true}
			},
			not: []string{"--hostname-override"}},
		{name: "kubelet before 1.27 gets the runtime endpoint as a flag",
			edit: func(r *abi.RenderRequest) { r.Context.Kubelet.Version = "1.26.15" },
			want: []string{"--container-runtime-endpoint=unix:///run/containerd/containerd.sock"}},
		{name: "initial taints",
			edit: func(r *abi.RenderRequest) { r.Context.Kubelet.InitialTaints = "dedicated=infra:NoSchedule" },
			want: []string{"--register-with-taints=dedicated=infra:NoSchedule"}},
		{name: "dual-stack with a cloud provider leaves node IPs to it",
			edit: func(r *abi.RenderRequest) { r.Context.Network.IPFamily = "IPv4+IPv6" },
			not:  []string{"--node-ip"}},
		{name: "dual-stack without a cloud provider sets both node IPs",
			edit: func(r *abi.RenderRequest) {
				r.Context.Network.IPFamily = "IPv6+IPv4"
				r.Context.CloudProvider = abi.CloudProvider{Name: "vsphere"}
			},
			want: []string{"--node-ip=${KUBELET_NODE_IP}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edits := []func(*abi.RenderRequest){}
			if tt.edit != nil {
				edits = append(edits, tt.edit)
			}
			unit := unitContent(t, render(t, request(abi.StageProvisioning, edits...)), node.KubeletUnit)
			for _, w := range tt.want {
				if !strings.Contains(unit, w) {
					t.Errorf("kubelet.service lacks %q:\n%s", w, unit)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(unit, n) {
					t.Errorf("kubelet.service has %q:\n%s", n, unit)
				}
			}
		})
	}
}

func TestNodeEnvByIPFamily(t *testing.T) {
	for family, want := range map[string]string{
		"":          "ip=$(src -4 1.1.1.1)",
		"IPv6":      "ip=$(src -6 2001:4860:4860::8888)",
		"IPv4+IPv6": `ip="$v4,$v6"`,
		"IPv6+IPv4": `ip="$v6,$v4"`,
	} {
		cfg := render(t, request(abi.StageProvisioning, func(r *abi.RenderRequest) { r.Context.Network.IPFamily = family }))
		if script := file(t, cfg, node.NodeEnvScriptPath); !strings.Contains(script, want) {
			t.Errorf("%q: node-env lacks %q", family, want)
		}
		sysctl := file(t, cfg, node.SysctlPath)
		if v6 := strings.Contains(sysctl, "net.ipv6.conf.all.forwarding = 1"); v6 != (family != "") {
			t.Errorf("%q: IPv6 forwarding = %v", family, v6)
		}
	}
}

func TestKubeletConfiguration(t *testing.T) {
	type kc struct {
		ClusterDNS               []string          `json:"clusterDNS"`
		ClusterDomain            string            `json:"clusterDomain"`
		ContainerLogMaxFiles     int32             `json:"containerLogMaxFiles"`
		ContainerLogMaxSize      string            `json:"containerLogMaxSize"`
		ContainerRuntimeEndpoint string            `json:"containerRuntimeEndpoint"`
		EvictionHard             map[string]string `json:"evictionHard"`
		FeatureGates             map[string]bool   `json:"featureGates"`
		ImageMinimumGCAge        string            `json:"imageMinimumGCAge"`
		KubeReserved             map[string]string `json:"kubeReserved"`
		MaxPods                  *int32            `json:"maxPods"`
		SystemReserved           map[string]string `json:"systemReserved"`
		ResolvConf               string            `json:"resolvConf"`
		CgroupDriver             string            `json:"cgroupDriver"`
		SerializeImagePulls      *bool             `json:"serializeImagePulls"`
	}
	parse := func(t *testing.T, req *abi.RenderRequest) kc {
		var out kc
		if err := json.Unmarshal([]byte(file(t, render(t, req), node.KubeletConfigPath)), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	defaults := parse(t, request(abi.StageProvisioning))
	if defaults.ContainerLogMaxSize != "100Mi" || defaults.ContainerLogMaxFiles != 5 || defaults.MaxPods != nil ||
		defaults.KubeReserved["memory"] != "200Mi" || defaults.EvictionHard["memory.available"] != "100Mi" ||
		defaults.CgroupDriver != "systemd" || defaults.ResolvConf != node.KubeletResolvConfPath ||
		defaults.ContainerRuntimeEndpoint != node.ContainerdSocket || defaults.SerializeImagePulls == nil || *defaults.SerializeImagePulls ||
		!reflect.DeepEqual(defaults.ClusterDNS, []string{"10.96.0.10"}) || !defaults.FeatureGates["RotateKubeletServerCertificate"] {
		t.Errorf("defaults: %+v", defaults)
	}

	pods, files := int32(42), int32(9)
	set := parse(t, request(abi.StageProvisioning, func(r *abi.RenderRequest) {
		r.Context.Kubelet.Config = abi.KubeletConfig{
			KubeReserved: map[string]string{"cpu": "1"}, SystemReserved: map[string]string{"memory": "1Gi"},
			EvictionHard: map[string]string{"memory.available": "5%"}, MaxPods: &pods, ContainerLogMaxSize: "10Mi",
			ContainerLogMaxFiles: &files, ImageMinimumGCAge: "2m0s",
		}
		r.Context.Cluster.Domain = "example.internal"
	}))
	if set.MaxPods == nil || *set.MaxPods != 42 || set.ContainerLogMaxFiles != 9 || set.ContainerLogMaxSize != "10Mi" ||
		!reflect.DeepEqual(set.KubeReserved, map[string]string{"cpu": "1"}) || !reflect.DeepEqual(set.SystemReserved, map[string]string{"memory": "1Gi"}) ||
		!reflect.DeepEqual(set.EvictionHard, map[string]string{"memory.available": "5%"}) || set.ImageMinimumGCAge != "2m0s" ||
		set.ClusterDomain != "example.internal" {
		t.Errorf("annotations not applied: %+v", set)
	}
}

func TestPlaceholdersAreCopiedVerbatim(t *testing.T) {
	edit := func(r *abi.RenderRequest) {
		r.Context.CloudProvider.HasCloudConfig = true
		r.Context.Secrets.CloudConfig = "__OSM_SECRET_CLOUD_CONFIG__"
		r.Context.ContainerRuntime.Config = plugintest.ContainerdConfig + "__OSM_SECRET_REGISTRY_AUTH__\n"
	}
	prov := render(t, request(abi.StageProvisioning, edit))
	for path, placeholder := range map[string]string{
		node.BootstrapKubeconfigPath: `"token": "__OSM_SECRET_BOOTSTRAP_TOKEN__"`,
		node.CloudConfigPath:         "__OSM_SECRET_CLOUD_CONFIG__\n",
		node.ContainerdConfigPath:    "__OSM_SECRET_REGISTRY_AUTH__\n",
	} {
		if f := file(t, prov, path); !strings.Contains(f, placeholder) {
			t.Errorf("%s lacks %q:\n%s", path, placeholder, f)
		}
	}
	boot := render(t, request(abi.StageBootstrap))
	script := file(t, boot, node.BootstrapScriptPath)
	if !strings.Contains(script, "tok='__OSM_SECRET_PROVISIONING_TOKEN__'") {
		t.Errorf("bootstrap script lacks the provisioning token placeholder:\n%s", script)
	}
	if f := boot.File(node.BootstrapScriptPath); f.Content.Inline.Encoding != "gzip" {
		t.Errorf("bootstrap script encoding %q, want gzip (it is most of the size-limited user-data)", f.Content.Inline.Encoding)
	}
	without := render(t, request(abi.StageProvisioning))
	if without.File(node.CloudConfigPath) != nil {
		t.Errorf("cloud-config written without a cloud config")
	}
}

func TestBootstrapFetch(t *testing.T) {
	cfg := render(t, request(abi.StageBootstrap, func(r *abi.RenderRequest) {
		r.Context.Cluster.ServerURL = "https://10.0.0.1:6443/"
		r.Context.Cluster.ProvisioningSecret = abi.SecretRef{Namespace: "ns", Name: "md-ns-provisioning-config", Key: "user.data"}
	}))
	script := file(t, cfg, node.BootstrapScriptPath)
	for _, want := range []string{
		"url='https://10.0.0.1:6443/api/v1/namespaces/ns/secrets/md-ns-provisioning-config'",
		"curl -sS --cacert /etc/kubernetes/pki/ca.crt ",
		`grep -o '"user\.data": *"[^"]*"'`,
		"0/401 | 0/403)",
		"cloud-init clean",
		"set -- init --file $f; else set -- --file $f init",
		"systemctl start --no-block osm-setup.service",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("bootstrap script lacks %q:\n%s", want, script)
		}
	}
	if strings.Contains(script, " -k ") || strings.Contains(script, "--insecure") || strings.Contains(script, "jq") {
		t.Errorf("bootstrap script skips TLS verification or needs jq:\n%s", script)
	}
	if got := file(t, cfg, node.CACertPath); got != plugintest.CACert+"\n" {
		t.Errorf("ca.crt = %q", got)
	}
	u := cfg.Unit(node.BootstrapUnit)
	if u == nil || u.Enable == nil || !*u.Enable || !strings.Contains(*u.Content, "[Install]") {
		t.Errorf("bootstrap unit must be enabled with an [Install] section: %+v", u)
	}
}

func TestBootstrapProxyAndAzure(t *testing.T) {
	script := file(t, render(t, request(abi.StageBootstrap, func(r *abi.RenderRequest) {
		r.Context.Proxy = abi.Proxy{HTTPProxy: "http://proxy:3128", NoProxy: "10.0.0.0/8"}
		r.Context.CloudProvider = abi.CloudProvider{Name: "azure"}
	})), node.BootstrapScriptPath)
	proxy := strings.Index(script, "export HTTP_PROXY=$p")
	fetch := strings.Index(script, "curl -sS")
	if proxy < 0 || fetch < proxy || !strings.Contains(script, "p='http://proxy:3128' n='10.0.0.0/8'") {
		t.Errorf("proxy must be set before the fetch:\n%s", script)
	}
	if !strings.Contains(script, "cloud-init init --local") {
		t.Errorf("azure needs cloud-init's local stage after the clean:\n%s", script)
	}
}

func TestStaticNetworkUnsupported(t *testing.T) {
	_, err := guest.Call(testPlugin(), request(abi.StageBootstrap, func(r *abi.RenderRequest) {
		r.Context.Network = abi.Network{CIDR: "10.0.0.5/24", Gateway: "10.0.0.1"}
	}))
	if err == nil || !strings.Contains(err.Error(), "static network configuration") {
		t.Fatalf("error = %v, want a refusal of the static network configuration", err)
	}
}

// TestMergeKeepsTheProfilesInput checks the customization contract: the profile's template output is applied
// on top of the plugin's configuration.
func TestMergeKeepsTheProfilesInput(t *testing.T) {
	content := "[Service]\nExecStart=/bin/true\n"
	cfg := render(t, request(abi.StageProvisioning, func(r *abi.RenderRequest) {
		r.Input = abi.NodeConfig{
			Files: []abi.File{
				abi.PlainFile(node.SysctlPath, 0o644, "vm.swappiness = 0\n"),
				abi.PlainFile("/etc/containerd/certs.d/docker.io/hosts.toml", 0o600, "host's hosts.toml\n"),
				abi.PlainFile("/etc/motd", 0o644, "welcome\n"),
			},
			Units:       []abi.Unit{{Name: node.HealthServiceUnit, Content: &content}},
			UserSSHKeys: []string{"ssh-rsa AAAA operator"},
			Modules: &abi.Modules{
				BootCMD:        []string{"echo boot"},
				RunCMD:         []string{"echo run"},
				RHSubscription: map[string]string{"username": "u"},
			},
		}
	}))
	if got := file(t, cfg, node.SysctlPath); got != "vm.swappiness = 0\n" {
		t.Errorf("input file did not replace the plugin's: %q", got)
	}
	if got := file(t, cfg, "/etc/containerd/certs.d/docker.io/hosts.toml"); got != "host's hosts.toml\n" {
		t.Errorf("hosts.toml = %q, want the input's", got)
	}
	if file(t, cfg, "/etc/motd") != "welcome\n" {
		t.Errorf("input file lost")
	}
	if got := unitContent(t, cfg, node.HealthServiceUnit); got != content {
		t.Errorf("input unit did not replace the plugin's: %q", got)
	}
	seen := map[string]bool{}
	for _, f := range cfg.Files {
		if seen[f.Path] {
			t.Errorf("duplicate path %s", f.Path)
		}
		seen[f.Path] = true
	}
	if strings.Join(cfg.UserSSHKeys, ",") != "ssh-rsa AAAA operator" {
		t.Errorf("ssh keys = %v", cfg.UserSSHKeys)
	}
	if cfg.Modules == nil || cfg.Modules.RHSubscription["username"] != "u" || strings.Join(cfg.Modules.RunCMD, ";") != "echo run" {
		t.Errorf("modules = %+v", cfg.Modules)
	}
	// cloud-init's init stage, which applies the provisioning configuration, does not run runcmd.
	if got := file(t, cfg, node.ProvisioningCommandsPath); !strings.Contains(got, "\necho run\n") || strings.Contains(got, "echo boot") {
		t.Errorf("provisioning commands = %q", got)
	}
	if !strings.Contains(file(t, cfg, node.SetupScriptPath), "then "+node.ProvisioningCommandsPath+" ||") {
		t.Errorf("osm-setup does not run the provisioning commands")
	}
}

func TestMergeFunction(t *testing.T) {
	own := &abi.NodeConfig{Files: []abi.File{abi.PlainFile("/a", 0o644, "own a"), abi.PlainFile("/b", 0o644, "own b")},
		UserSSHKeys: []string{"k1"}, Modules: &abi.Modules{RunCMD: []string{"own"}}}
	in := &abi.NodeConfig{Files: []abi.File{abi.PlainFile("/b", 0o600, "input b"), abi.PlainFile("/c", 0o644, "input c")},
		UserSSHKeys: []string{"k1", "k2"}, Modules: &abi.Modules{RunCMD: []string{"input"}, YumRepoDir: "/etc/yum.repos.d"}}
	got := node.Merge(own, in)
	var paths []string
	for _, f := range got.Files {
		paths = append(paths, f.Path+"="+f.Content.Inline.Data)
	}
	if strings.Join(paths, ",") != "/a=own a,/b=input b,/c=input c" {
		t.Errorf("files = %v", paths)
	}
	if strings.Join(got.UserSSHKeys, ",") != "k1,k2" || strings.Join(got.Modules.RunCMD, ",") != "own,input" || got.Modules.YumRepoDir != "/etc/yum.repos.d" {
		t.Errorf("merged %+v %+v", got.UserSSHKeys, got.Modules)
	}
	if len(own.Files) != 2 || own.Files[1].Content.Inline.Data != "own b" {
		t.Errorf("Merge modified its input")
	}
	if node.Merge(&abi.NodeConfig{}, &abi.NodeConfig{}).Modules != nil {
		t.Errorf("empty modules must stay nil")
	}
}

func TestActivation(t *testing.T) {
	setup := file(t, render(t, request(abi.StageProvisioning, func(r *abi.RenderRequest) {
		r.Input.Units = []abi.Unit{{Name: "systemd-resolved.service", DropIns: []abi.DropIn{{Name: "x.conf", Content: "[Service]\n"}}}}
	})), node.SetupScriptPath)
	for _, want := range []string{
		"systemctl mask swap.target ufw.service",
		"systemctl enable containerd.service kubelet.service osm-setup.service osm-health-monitor.timer",
		"systemctl --no-block try-restart systemd-resolved.service",
		"systemctl --no-block start containerd.service kubelet.service osm-health-monitor.timer",
	} {
		if !strings.Contains(setup, want) {
			t.Errorf("osm-setup lacks %q", want)
		}
	}
}

func TestBinaries(t *testing.T) {
	tests := []struct {
		name   string
		config map[string]string
		base   string
		want   []string
	}{
		{name: "defaults", want: []string{"cni_version='v1.9.1'", "crictl_version='v1.33.0'", "kube_version='v1.33.2'",
			"cni_base='https://github.com/containernetworking/plugins/releases/download'", "kube_base='https://dl.k8s.io'"}},
		{name: "mirrors", base: "https://mirror.example.com/k8s/",
			config: map[string]string{"cniBaseURL": "https://mirror.example.com/cni/", "criToolsBaseURL": "https://mirror.example.com/crictl", "criToolsVersion": "v1.32.0", "cniVersion": "v1.6.2"},
			want: []string{"cni_base='https://mirror.example.com/cni'", "crictl_base='https://mirror.example.com/crictl'", "crictl_version='v1.32.0'",
				"cni_version='v1.6.2'", "kube_base='https://mirror.example.com/k8s'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setup := file(t, render(t, request(abi.StageProvisioning, func(r *abi.RenderRequest) {
				r.Config = tt.config
				if tt.base != "" {
					r.Context.BinaryBaseURL = tt.base
				}
			})), node.SetupScriptPath)
			for _, w := range append(tt.want, `download "$kube_base/$kube_version/bin/linux/$arch/$bin"`, `"${3:-$1.sha256}"`) {
				if !strings.Contains(setup, w) {
					t.Errorf("osm-setup lacks %q", w)
				}
			}
		})
	}
	if v := node.CRIToolsVersion(&node.Request{Kube: node.KubeVersion{Major: 1, Minor: 40}, Config: map[string]string{}}); v != "v1.37.0" {
		t.Errorf("cri-tools for 1.40 = %s, want the newest known, v1.37.0", v)
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name, want string
		edit       func(*abi.RenderRequest)
	}{
		{"bad config", "spec.plugin.config.cniBaseURL", func(r *abi.RenderRequest) { r.Config = map[string]string{"cniBaseURL": "ftp://x"} }},
		{"unknown config", "spec.plugin.config.mirror", func(r *abi.RenderRequest) { r.Config = map[string]string{"mirror": "x"} }},
		{"bad kubelet version", "kubelet version", func(r *abi.RenderRequest) { r.Context.Kubelet.Version = "latest" }},
		{"no CA", "cluster CA", func(r *abi.RenderRequest) { r.Context.Cluster.CACert = "" }},
		{"no secret", "provisioning Secret", func(r *abi.RenderRequest) { r.Context.Cluster.ProvisioningSecret.Key = "" }},
		{"no token", "provisioning token", func(r *abi.RenderRequest) { r.Context.Secrets.ProvisioningToken = "" }},
		{"utility", "provisioning utility", func(r *abi.RenderRequest) { r.ProvisioningUtility = abi.UtilityIgnition }},
		{"stage", "unknown stage", func(r *abi.RenderRequest) { r.Stage = "final" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := guest.Call(testPlugin(), request(abi.StageBootstrap, tt.edit))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
	_, err := guest.Call(testPlugin(), request(abi.StageProvisioning, func(r *abi.RenderRequest) { r.Context.Secrets.BootstrapToken = "" }))
	if err == nil || !strings.Contains(err.Error(), "bootstrap token") {
		t.Errorf("error = %v, want a missing bootstrap token", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		req    abi.ValidateRequest
		fields []string
	}{
		{name: "valid", req: abi.ValidateRequest{OSVersion: "1", ProvisioningUtility: "cloud-init", CloudProviders: []string{"aws"},
			Config: map[string]string{"containerdSource": "distro", "extraPackages": "open-iscsi, multipath-tools", "journaldSystemMaxUse": "2G"}}},
		{name: "bad values", req: abi.ValidateRequest{OSVersion: "1", Config: map[string]string{
			"containerdSource": "snap", "cniVersion": "1.9", "criToolsBaseURL": "https://x/'y", "extraPackages": "rm -rf /", "zzz": "1",
			"containerdVersion": "2.2;reboot", "journaldSystemMaxUse": "lots"}},
			fields: []string{"spec.plugin.config.cniVersion", "spec.plugin.config.containerdSource", "spec.plugin.config.containerdVersion",
				"spec.plugin.config.criToolsBaseURL", "spec.plugin.config.extraPackages", "spec.plugin.config.journaldSystemMaxUse", "spec.plugin.config.zzz"}},
		{name: "os, version, utility, provider", req: abi.ValidateRequest{OSName: "otheros", OSVersion: "2", ProvisioningUtility: "ignition", CloudProviders: []string{"aws", "hetzner"}},
			fields: []string{"spec.osName", "spec.osVersion", "spec.provisioningUtility", "spec.supportedCloudProviders[1].name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := guest.CallValidate(testPlugin(), &tt.req)
			if err != nil {
				t.Fatal(err)
			}
			var fields []string
			for _, e := range resp.Errors {
				fields = append(fields, e.Field)
				if e.Message == "" {
					t.Errorf("%s: empty message", e.Field)
				}
			}
			if strings.Join(fields, ",") != strings.Join(tt.fields, ",") {
				t.Errorf("fields = %v, want %v (%+v)", fields, tt.fields, resp.Errors)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	md, err := guest.CallMetadata(testPlugin())
	if err != nil {
		t.Fatal(err)
	}
	if md.Version != "v0.1.0" || len(md.ConfigSchema) == 0 {
		t.Errorf("metadata %+v", md)
	}
	for _, o := range md.ConfigSchema {
		if o.Description == "" {
			t.Errorf("config option %s has no description", o.Name)
		}
	}
}

func TestDeterministic(t *testing.T) {
	for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
		edit := func(r *abi.RenderRequest) {
			r.Context.Kubelet.FeatureGates = map[string]bool{"A": true, "B": false, "C": true, "D": true}
			r.Context.ContainerRuntime.HostsTOML = map[string]string{"a.io": "a", "b.io": "b", "c.io": "c", "d.io": "d"}
			r.Context.Kubelet.Config.KubeReserved = map[string]string{"cpu": "1", "memory": "1Gi", "pid": "100"}
		}
		first, _ := json.Marshal(render(t, request(stage, edit)))
		for range 10 {
			again, _ := json.Marshal(render(t, request(stage, edit)))
			if string(first) != string(again) {
				t.Fatalf("%s output differs between renders", stage)
			}
		}
	}
}

// TestScriptsParse runs `bash -n` on every generated script, so a quoting mistake fails here rather than on a
// node.
func TestScriptsParse(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is needed to check the generated scripts: %v", err)
	}
	edit := func(r *abi.RenderRequest) {
		r.Context.Proxy = abi.Proxy{HTTPProxy: "http://proxy:3128", NoProxy: "localhost"}
		r.Context.HostCACert = plugintest.CACert
		r.Input.Modules = &abi.Modules{RunCMD: []string{"echo 'quoted' \"run\""}}
		r.Config = map[string]string{"extraPackages": "jq"}
	}
	for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
		for _, f := range render(t, request(stage, edit)).Files {
			if !strings.HasPrefix(f.Content.Inline.Data, "#!/bin/") {
				continue
			}
			cmd := exec.Command(bash, "-n")
			cmd.Stdin = strings.NewReader(f.Content.Inline.Data)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s does not parse: %v\n%s\n%s", f.Path, err, out, f.Content.Inline.Data)
			}
		}
	}
}
