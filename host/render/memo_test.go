package render_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/sdk/abi"
)

// rendered is everything a render of a MachineDeployment leaves behind: the OSC spec and both stages' user-data.
type rendered struct{ osc, bootstrap, provisioning string }

func renderWith(t *testing.T, src render.PluginSource, osp *osmv1alpha1.OperatingSystemProfile, mdName string) rendered {
	t.Helper()
	md := upstreamMD(t, mdName, osp.Name, "1.33.2", "ubuntu", "aws", `{}`)
	out, err := (&render.Renderer{Plugins: src}).Render(context.Background(), render.Input{MachineDeployment: md, Profile: osp,
		Cluster: render.ClusterInfo{ServerURL: "https://api:6443", CACert: "ca"}, Settings: upstreamSettings(true)})
	if err != nil {
		t.Fatal(err)
	}
	osc, err := json.Marshal(out.Spec)
	if err != nil {
		t.Fatal(err)
	}
	values := render.SecretValues{BootstrapToken: "abcdef.0123456789abcdef", ProvisioningToken: "provisioning-token"}
	var r rendered
	r.osc = string(osc)
	for stage, into := range map[abi.Stage]*string{abi.StageBootstrap: &r.bootstrap, abi.StageProvisioning: &r.provisioning} {
		data, err := out.UserData(context.Background(), stage, values)
		if err != nil {
			t.Fatal(err)
		}
		*into = string(data)
	}
	return r
}

// renderCalls is how many osm_render calls reached the plugin host: the samples of osm_plugin_call_duration_seconds.
func renderCalls(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() != "osm_plugin_call_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "export" && l.GetValue() == abi.ExportRender {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

func defaultManager(t *testing.T) (*plugin.Manager, *prometheus.Registry) {
	t.Helper()
	if names, err := plugins.Names(plugins.Builtin()); err != nil || len(names) == 0 {
		t.Skip("the default plugins are not built (make plugins)")
	}
	cache := filepath.Join(os.TempDir(), "osm-render-test-plugin-cache")
	reg := prometheus.NewRegistry()
	m, err := plugin.New(plugin.Config{CacheDir: cache, Precompiled: plugins.PrecompiledDir()}, plugins.Builtin(), reg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m, reg
}

func defaultProfile(t *testing.T, name string) *osmv1alpha1.OperatingSystemProfile {
	t.Helper()
	osps, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, osp := range osps {
		if osp.Name == name {
			osp.Namespace = "kube-system"
			return osp
		}
	}
	t.Fatalf("no default profile %s", name)
	return nil
}

// TestNeighboursRenderOnce renders two MachineDeployments that differ only in their names with the default
// Ubuntu profile and its wasm plugin: the second costs no plugin call, its configuration names it (the plugin
// copied the placeholders, the host put the real names in), and everything it renders is byte for byte what the
// plugin renders from the real names with the memo off.
func TestNeighboursRenderOnce(t *testing.T) {
	osp := defaultProfile(t, "osp-ubuntu")
	m, reg := defaultManager(t)
	src := &plugin.Resolver{Manager: m}

	a := renderWith(t, src, osp, "md-a")
	first := renderCalls(t, reg)
	if first == 0 {
		t.Fatal("the first MachineDeployment's render made no plugin call")
	}
	b := renderWith(t, src, osp, "md-b")
	if n := renderCalls(t, reg); n != first {
		t.Errorf("the second MachineDeployment made %d plugin calls, want none (its request is the first's)", n-first)
	}
	if st := m.Memo().Stats(); st.Hits == 0 {
		t.Errorf("memo stats %+v: no hit", st)
	}
	for what, r := range map[string]rendered{"md-a": a, "md-b": b} {
		other := map[string]string{"md-a": "md-b", "md-b": "md-a"}[what]
		url := "/secrets/" + what + "-kube-system-provisioning-config"
		if !strings.Contains(r.osc, url) { // the user-data holds the script compressed
			t.Errorf("%s: the bootstrap stage does not fetch %s", what, url)
		}
		for _, s := range []string{r.osc, r.bootstrap, r.provisioning} {
			if strings.Contains(s, other+"-kube-system") || strings.Contains(s, "__OSM_MD_") {
				t.Errorf("%s: holds %s's name or an identity placeholder", what, other)
			}
		}
	}

	// What the plugin renders from the real names, without the memo: the same bytes.
	defer render.SetIdentityPlaceholders(false)()
	plain, plainReg := defaultManager(t)
	plain.SetMemo(nil)
	plainSrc := &plugin.Resolver{Manager: plain}
	for name, want := range map[string]rendered{"md-a": a, "md-b": b} {
		got := renderWith(t, plainSrc, osp, name)
		for _, c := range []struct{ what, got, want string }{{"OSC spec", got.osc, want.osc}, {"bootstrap", got.bootstrap, want.bootstrap},
			{"provisioning", got.provisioning, want.provisioning}} {
			if c.got != c.want {
				t.Errorf("%s %s differs from the real names' render without the memo:\nmemo:  %.300s\nplain: %.300s", name, c.what, c.want, c.got)
			}
		}
	}
	if n := renderCalls(t, plainReg); n != 2*first {
		t.Errorf("without the memo two MachineDeployments made %d plugin calls, want %d", n, 2*first)
	}
}

// identityPlugin records the MachineDeployment names it was given; echo writes the name into a file, as a
// plugin that only copies it; upper writes it in upper case, which only a plugin given the real name can.
type identityPlugin struct {
	funcPlugin
	real bool
	mu   sync.Mutex
	seen []string
}

func (p *identityPlugin) Metadata() abi.Metadata {
	md := p.funcPlugin.Metadata()
	md.RealIdentity = p.real
	return md
}

func (p *identityPlugin) Render(ctx context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	p.mu.Lock()
	p.seen = append(p.seen, req.Context.MachineDeployment.Name+" "+req.Context.Cluster.ProvisioningSecret.Name)
	p.mu.Unlock()
	return p.funcPlugin.Render(ctx, req)
}

// TestPluginsSeeIdentityPlaceholders: a plugin that copies the MachineDeployment's name gets a placeholder and
// the configuration gets the real name; one that declares RealIdentity (it computes on the name) gets the real
// name, in its context and in its input.
func TestPluginsSeeIdentityPlaceholders(t *testing.T) {
	echo := &identityPlugin{funcPlugin: funcPlugin{secretPlugin: secretPlugin{name: "main"}, render: func(req *abi.RenderRequest, cfg *abi.NodeConfig) {
		ref := req.Context.MachineDeployment
		cfg.SetFile(abi.PlainFile("/etc/md", 0o644, ref.Namespace+"/"+ref.Name+" revision "+ref.Revision))
	}}}
	upper := &identityPlugin{real: true, funcPlugin: funcPlugin{secretPlugin: secretPlugin{name: "pipe"}, render: func(req *abi.RenderRequest, cfg *abi.NodeConfig) {
		if f := cfg.File("/etc/md"); f != nil {
			cfg.SetFile(abi.PlainFile("/etc/md-upper", 0o644, strings.ToUpper(f.Content.Inline.Data)))
		}
	}}}
	osp := &osmv1alpha1.OperatingSystemProfile{}
	loadYAML(t, filepath.Join(upstreamDir, "osp-ubuntu.yaml"), osp)
	osp.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "main"}
	osp.Spec.Plugins = []osmv1alpha1.PluginReference{{Builtin: "pipe"}}
	src := funcPlugins{"main": echo, "pipe": upper}
	for _, name := range []string{"workers", "gpu-workers"} {
		r := renderWith(t, src, osp, name)
		if want := "kube-system/" + name + " revision 1"; !strings.Contains(r.provisioning, want) || !strings.Contains(r.osc, want) {
			t.Errorf("%s: /etc/md does not hold %q", name, want)
		}
		if want := strings.ToUpper("kube-system/" + name + " revision 1"); !strings.Contains(r.provisioning, want) {
			t.Errorf("%s: the RealIdentity plugin did not get the real name in its input (want %q)", name, want)
		}
	}
	for _, s := range echo.seen {
		if s != "__OSM_MD_NAME__ __OSM_MD_NAME__-__OSM_MD_NAMESPACE__-provisioning-config" {
			t.Errorf("the copying plugin saw %q, want the placeholders", s)
		}
	}
	if len(upper.seen) != 4 || upper.seen[0] != "workers workers-kube-system-provisioning-config" || upper.seen[2] != "gpu-workers gpu-workers-kube-system-provisioning-config" {
		t.Errorf("the RealIdentity plugin saw %q, want the real names", upper.seen)
	}
}
