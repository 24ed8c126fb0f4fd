package plugins_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	sigsyaml "sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/encode/cloudinit"
	"github.com/osmhq/osm/host/encode/cloudinit/cloudinittest"
	"github.com/osmhq/osm/host/encode/ignition"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/plugins/pluginstest"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/plugintest"
)

// update is plugintest's -update flag (registered by that package), which also rewrites testdata/golden.
func update() bool { return flag.Lookup("update").Value.String() == "true" }

// The real credentials the host substitutes for the placeholders.
var secrets = render.SecretValues{
	BootstrapToken:    "abcdef.0123456789abcdef",
	ProvisioningToken: "provisioning-token-0123456789",
	RegistryAuth:      `[plugins."io.containerd.cri.v1.images".registry.configs."registry.example.com".auth]` + "\nauth = \"dXNlcjpwYXNz\"\n",
}

const kubeletVersion = "1.33.2"

// goldenCases are rendered to testdata/golden (run with -update to rewrite them).
var goldenCases = map[string]bool{
	"osp-ubuntu/aws/bootstrap":           true,
	"osp-ubuntu/aws/provisioning":        true,
	"osp-flatcar/openstack/bootstrap":    true,
	"osp-flatcar/openstack/provisioning": true,
	"osp-rhel/azure/provisioning":        true,
}

// newSource resolves built-in plugins from dist through the controller's plugin manager and source.
func newSource(t testing.TB, dist fs.FS) *plugin.Resolver {
	t.Helper()
	m, err := plugin.New(plugin.Config{CacheDir: pluginstest.CacheDir(t), Precompiled: plugins.PrecompiledDir()}, dist, prometheus.NewRegistry(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return &plugin.Resolver{Manager: m}
}

func settings() render.Settings {
	s := render.DefaultSettings()
	s.ClusterDNSIPs = []net.IP{net.ParseIP("10.96.0.10")}
	s.HTTPProxy = "http://proxy.example.com:3128"
	s.RegistryMirrors = []string{"https://mirror.example.com"}
	s.InsecureRegistries = []string{"10.0.0.1:5000"}
	s.RegistryCredentialHosts = []string{"registry.example.com"}
	s.PauseImage = "registry.k8s.io/pause:3.10"
	return s
}

// machineDeployment is a MachineDeployment as machine-controller users write them, for osp on provider.
func machineDeployment(t testing.TB, osp *osmv1alpha1.OperatingSystemProfile, provider string) *clusterv1alpha1.MachineDeployment {
	t.Helper()
	osSpec := map[string]any{}
	switch osp.Spec.OSName {
	case "rhel":
		osSpec = map[string]any{"rhelSubscriptionManagerUser": "rh-user", "rhelSubscriptionManagerPassword": "rh-password"}
	case "flatcar":
		osSpec = map[string]any{"disableAutoUpdate": true}
	}
	raw, err := json.Marshal(map[string]any{
		"sshPublicKeys":       []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOSMtest test@osm"},
		"cloudProvider":       provider,
		"cloudProviderSpec":   map[string]any{},
		"operatingSystem":     string(osp.Spec.OSName),
		"operatingSystemSpec": osSpec,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &clusterv1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "kube-system", Annotations: map[string]string{
			clusterv1alpha1.AnnotationRevision:                        "1",
			clusterv1alpha1.AnnotationOSP:                             osp.Name,
			clusterv1alpha1.AnnotationKubeletConfigPrefix + "MaxPods": "110",
		}},
		Spec: clusterv1alpha1.MachineDeploymentSpec{Template: clusterv1alpha1.MachineTemplateSpec{Spec: clusterv1alpha1.MachineSpec{
			Versions:     clusterv1alpha1.MachineVersionInfo{Kubelet: kubeletVersion},
			ProviderSpec: clusterv1alpha1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}},
		}}},
	}
}

type size struct{ bootstrap, provisioning int }

// TestDefaultProfiles renders every default profile for each of its cloud providers through the controller's
// render pipeline with the built WebAssembly plugins, encodes both stages as the user-data machine-controller
// and the node receive, and checks them with the real consumers' validators (cloud-init schema, Ignition's
// parser) and for the content that makes a node join.
func TestDefaultProfiles(t *testing.T) {
	profiles, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(profiles) != 9 {
		t.Fatalf("%d default profiles, want 9", len(profiles))
	}
	src := newSource(t, dist(t))
	r := &render.Renderer{Plugins: src}

	var mu sync.Mutex
	sizes := map[string]size{}
	t.Cleanup(func() {
		names := make([]string, 0, len(sizes))
		for n := range sizes {
			names = append(names, n)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "\n  %-44s bootstrap %6d B   provisioning %6d B", n, sizes[n].bootstrap, sizes[n].provisioning)
		}
		t.Logf("user-data sizes:%s", b.String())
	})

	for _, osp := range profiles {
		providers := osp.Spec.SupportedCloudProviders
		if testing.Short() {
			providers = providers[:1]
		}
		for _, cp := range providers {
			name := osp.Name + "/" + cp.Name
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				md := machineDeployment(t, osp, cp.Name)
				out, err := r.Render(context.Background(), render.Input{
					MachineDeployment: md, Profile: osp, Settings: settings(),
					Cluster: render.ClusterInfo{ServerURL: "https://api.cluster.example.com:6443", CACert: plugintest.CACert},
				})
				if err != nil {
					t.Fatal(err)
				}
				if out.Plugin == nil || out.Plugin.Name != osp.Spec.Plugin.Builtin || out.Plugin.Version != "v1.0.0" {
					t.Errorf("rendered by %+v, want plugin %s v1.0.0", out.Plugin, osp.Spec.Plugin.Builtin)
				}
				var sz size
				for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
					data, err := out.UserData(context.Background(), stage, secrets)
					if err != nil {
						t.Fatalf("%s user-data: %v", stage, err)
					}
					validate(t, out.Utility(), fmt.Sprintf("%s %s", name, stage), data)
					text := decode(t, out.Utility(), data)
					switch stage {
					case abi.StageBootstrap:
						sz.bootstrap = len(data)
						checkBootstrap(t, out, md, data, text)
					case abi.StageProvisioning:
						sz.provisioning = len(data)
						checkProvisioning(t, out, text)
					}
					if key := name + "/" + string(stage); goldenCases[key] {
						golden(t, key, out, data)
					}
				}
				mu.Lock()
				sizes[name] = sz
				mu.Unlock()
			})
		}
	}
}

func validate(t *testing.T, utility, name string, data []byte) {
	t.Helper()
	switch utility {
	case abi.UtilityCloudInit:
		cloudinittest.Validate(t, name, data)
	case abi.UtilityIgnition:
		if err := ignition.Validate(data); err != nil {
			t.Errorf("%s: Ignition rejects the user-data: %v", name, err)
		}
	default:
		t.Fatalf("unexpected provisioning utility %q", utility)
	}
}

// checkBootstrap: small, TLS verified with the cluster CA, the right Secret, the token only after substitution.
func checkBootstrap(t *testing.T, out *render.Output, md *clusterv1alpha1.MachineDeployment, data []byte, text string) {
	t.Helper()
	// A quarter of the smallest provider limit, plus the bootstrap's report that it fetched (sdk/SPEC.md §11).
	if budget := render.BootstrapSizeLimit/4 + 512; len(data) > budget {
		t.Errorf("bootstrap user-data is %d bytes, want at most %d (a quarter of the smallest provider limit and the report)", len(data), budget)
	}
	path := "/api/v1/namespaces/cloud-init-settings/secrets/" + render.ProvisioningSecretName(md)
	for _, want := range []string{"--cacert /etc/kubernetes/pki/ca.crt", "https://api.cluster.example.com:6443" + path,
		"tok='" + secrets.ProvisioningToken + "'", plugintest.CACert} {
		if !strings.Contains(text, want) {
			t.Errorf("bootstrap user-data lacks %q", want)
		}
	}
	for _, bad := range []string{"curl -k", " --insecure", "jq ", "apt-get", "dnf ", "yum "} {
		if strings.Contains(text, bad) {
			t.Errorf("bootstrap user-data contains %q: it must verify TLS and need no packages", bad)
		}
	}
	stage := asJSON(t, out.Stage(abi.StageBootstrap))
	if strings.Contains(stage, secrets.ProvisioningToken) || !strings.Contains(stage, render.Placeholders.ProvisioningToken) {
		t.Errorf("the rendered bootstrap stage must hold the token placeholder, not the token")
	}
}

// checkProvisioning: the kubelet of the MachineDeployment's version, its bootstrap kubeconfig with the token
// substituted, containerd's configuration and the kubelet configuration from the annotations.
func checkProvisioning(t *testing.T, out *render.Output, text string) {
	t.Helper()
	for _, want := range []string{
		"kube_version='v" + kubeletVersion + "'",
		"download \"$kube_base/$kube_version/bin/linux/$arch/$bin\"",
		"kube_base='https://dl.k8s.io'",
		`"token": "` + secrets.BootstrapToken + `"`,
		`"maxPods": 110`,
		`"clusterDNS": [` + "\n    \"10.96.0.10\"",
		secrets.RegistryAuth,
		"server = \"https://registry-1.docker.io\"",
		"HTTPS_PROXY=http://proxy.example.com:3128",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("provisioning user-data lacks %q", want)
		}
	}
	stage := out.Stage(abi.StageProvisioning)
	kubeconfig := stage.File("/etc/kubernetes/bootstrap-kubelet.conf")
	if kubeconfig == nil || !strings.Contains(kubeconfig.Content.Inline.Data, render.Placeholders.BootstrapToken) {
		t.Errorf("the rendered bootstrap-kubelet.conf must hold the bootstrap token placeholder")
	}
	if s := asJSON(t, stage); strings.Contains(s, secrets.BootstrapToken) || strings.Contains(s, "dXNlcjpwYXNz") {
		t.Errorf("the rendered provisioning stage holds a credential")
	}
	for _, p := range []string{"/etc/containerd/certs.d/docker.io/hosts.toml", "/etc/containerd/certs.d/10.0.0.1:5000/hosts.toml"} {
		if stage.File(p) == nil {
			t.Errorf("no %s", p)
		}
	}
}

// decode returns the user-data's file contents and commands as one text, whatever transport encoding the
// encoder chose, so content checks see what lands on the node.
func decode(t *testing.T, utility string, data []byte) string {
	t.Helper()
	var b strings.Builder
	switch utility {
	case abi.UtilityCloudInit:
		var doc cloudinit.Document
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		for _, f := range doc.WriteFiles {
			content := f.Content
			switch f.Encoding {
			case "b64":
				raw, _ := base64.StdEncoding.DecodeString(content)
				content = string(raw)
			case "gz+b64":
				raw, _ := base64.StdEncoding.DecodeString(content)
				content = gunzip(t, raw)
			}
			b.WriteString("== " + f.Path + "\n" + content + "\n")
		}
		b.WriteString(strings.Join(doc.RunCMD, "\n"))
	case abi.UtilityIgnition:
		var cfg types.Config
		if err := json.Unmarshal(data, &cfg); err != nil {
			t.Fatal(err)
		}
		for _, f := range cfg.Storage.Files {
			b.WriteString("== " + f.Path + "\n" + dataURL(t, f.Contents) + "\n")
		}
		for _, u := range cfg.Systemd.Units {
			if u.Contents != nil {
				b.WriteString("== unit " + u.Name + "\n" + *u.Contents + "\n")
			}
			for _, d := range u.Dropins {
				b.WriteString("== drop-in " + u.Name + "/" + d.Name + "\n" + *d.Contents + "\n")
			}
		}
	}
	return b.String()
}

func dataURL(t *testing.T, r types.Resource) string {
	t.Helper()
	src := *r.Source
	var raw []byte
	if rest, ok := strings.CutPrefix(src, "data:;base64,"); ok {
		raw, _ = base64.StdEncoding.DecodeString(rest)
	} else if rest, ok := strings.CutPrefix(src, "data:,"); ok {
		s, err := url.PathUnescape(rest)
		if err != nil {
			t.Fatal(err)
		}
		raw = []byte(s)
	} else {
		t.Fatalf("unexpected source %.40q", src)
	}
	if r.Compression != nil && *r.Compression == "gzip" {
		return gunzip(t, raw)
	}
	return string(raw)
}

func gunzip(t *testing.T, raw []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// golden compares the rendered stage (as the OperatingSystemConfig stores it, placeholders included) and the
// user-data with testdata/golden. Ignition user-data is indented for review.
func golden(t *testing.T, key string, out *render.Output, data []byte) {
	t.Helper()
	base := filepath.Join("testdata", "golden", strings.ReplaceAll(key, "/", "_"))
	stage, err := sigsyaml.Marshal(render.ToOSC(out.Stage(abi.Stage(key[strings.LastIndex(key, "/")+1:]))))
	if err != nil {
		t.Fatal(err)
	}
	userData := data
	if out.Utility() == abi.UtilityIgnition {
		var buf bytes.Buffer
		if err := json.Indent(&buf, data, "", "  "); err != nil {
			t.Fatal(err)
		}
		buf.WriteByte('\n')
		userData = buf.Bytes()
	}
	for path, got := range map[string][]byte{base + ".osc.yaml": stage, base + ".userdata": userData} {
		if update() {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run the test with -update to create it)", err)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("%s differs from the current output; review the change and run the test with -update", path)
		}
	}
}

// dist returns the built plugins; hack/build-plugins.sh rebuilds the ones whose sources changed.
func dist(t testing.TB) fs.FS {
	t.Helper()
	return pluginstest.Dist(t)
}

// TestPluginSizes reports the size of each built plugin module: the controller compiles every one at start-up.
func TestPluginSizes(t *testing.T) {
	dist := dist(t)
	names, err := plugins.Names(dist)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range names {
		info, err := fs.Stat(dist, n+".wasm")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "\n  %-12s %8d B", n, info.Size())
		if info.Size() > 8<<20 {
			t.Errorf("plugin %s is %d bytes; keep default plugins well below 8 MiB", n, info.Size())
		}
	}
	t.Logf("plugin module sizes:%s", b.String())
}

// BenchmarkRenderDefaultUbuntu is one MachineDeployment rendered the way the controller does it with the default
// Ubuntu profile: templates, two calls into the wasm plugin (bootstrap and provisioning) on one fresh instance,
// secret substitution and cloud-config encoding of both stages. The plugin is loaded. "snapshot" is what the
// controller runs: instances start from the snapshot of an initialised, warmed-up instance; "initialising"
// makes every instance initialise itself (runtime.Config.NoSnapshot), for comparison.
func BenchmarkRenderDefaultUbuntu(b *testing.B) {
	for _, bc := range []struct {
		name       string
		noSnapshot bool
	}{{"snapshot", false}, {"initialising", true}} {
		b.Run(bc.name, func(b *testing.B) { benchmarkRenderDefaultUbuntu(b, bc.noSnapshot) })
	}
}

func benchmarkRenderDefaultUbuntu(b *testing.B, noSnapshot bool) {
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		b.Fatal(err)
	}
	var osp *osmv1alpha1.OperatingSystemProfile
	for _, d := range defaults {
		if d.Name == "osp-ubuntu" {
			osp = d
		}
	}
	m, err := plugin.New(plugin.Config{CacheDir: pluginstest.CacheDir(b), NoSnapshot: noSnapshot}, dist(b), prometheus.NewRegistry(), logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close(context.Background()) })
	r := &render.Renderer{Plugins: &plugin.Resolver{Manager: m}}
	in := render.Input{MachineDeployment: machineDeployment(b, osp, "aws"), Profile: osp, Settings: settings(),
		Cluster: render.ClusterInfo{ServerURL: "https://api.example.com:6443", CACert: plugintest.CACert}}
	ctx := context.Background()
	if _, err := r.Render(ctx, in); err != nil { // load and compile outside the timing
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out, err := r.Render(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
			if _, err := out.UserData(ctx, stage, secrets); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// recordingSource hands out plugins that remember the last request they rendered.
type recordingSource struct {
	inner render.PluginSource
	last  *abi.RenderRequest
	p     render.Plugin
}

func (r *recordingSource) Resolve(ctx context.Context, ns string, ref *osmv1alpha1.PluginReference) (render.Plugin, error) {
	p, err := r.inner.Resolve(ctx, ns, ref)
	if err != nil {
		return nil, err
	}
	r.p = p
	return recordingPlugin{Plugin: p, src: r}, nil
}

type recordingPlugin struct {
	render.Plugin
	src *recordingSource
}

func (p recordingPlugin) Render(ctx context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	p.src.last = req
	return p.Plugin.Render(ctx, req)
}

// ubuntuProvisioningRequest renders a MachineDeployment with the default Ubuntu profile through a recording
// source: its last request is the provisioning stage's, and its plugin the loaded Ubuntu plugin.
func ubuntuProvisioningRequest(b *testing.B) *recordingSource {
	b.Helper()
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		b.Fatal(err)
	}
	var osp *osmv1alpha1.OperatingSystemProfile
	for _, d := range defaults {
		if d.Name == "osp-ubuntu" {
			osp = d
		}
	}
	src := &recordingSource{inner: newSource(b, dist(b))}
	in := render.Input{MachineDeployment: machineDeployment(b, osp, "aws"), Profile: osp, Settings: settings(),
		Cluster: render.ClusterInfo{ServerURL: "https://api.example.com:6443", CACert: plugintest.CACert}}
	if _, err := (&render.Renderer{Plugins: src}).Render(context.Background(), in); err != nil {
		b.Fatal(err)
	}
	return src
}

// BenchmarkPluginCallDefaultUbuntu is one warm osm_render call of the Ubuntu plugin with the provisioning request
// the pipeline builds for a default profile, reporting the median and 99th percentile call time.
func BenchmarkPluginCallDefaultUbuntu(b *testing.B) {
	src := ubuntuProvisioningRequest(b)
	src.inner.(*plugin.Resolver).Manager.SetMemo(nil) // a call, not a remembered answer
	ctx := context.Background()
	req := src.last // the provisioning stage, rendered last
	reqJSON, _ := json.Marshal(req)
	var took []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, err := src.p.Render(ctx, req); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(reqJSON)), "request-bytes")
}
