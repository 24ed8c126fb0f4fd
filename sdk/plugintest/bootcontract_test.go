package plugintest_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/ignition"
	"github.com/osmhq/osm/sdk/plugintest"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func failures(t *testing.T, check func(tb testing.TB)) string {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec)
	}()
	<-done
	return strings.Join(rec.errors, "\n")
}

// without renders handoff and drops every line containing one of drop, the way a vendor's handoff that
// forgets a step looks.
func without(handoff func(*node.Request, *node.Script), drop ...string) func(*node.Request, *node.Script) {
	return func(r *node.Request, s *node.Script) {
		var tmp node.Script
		handoff(r, &tmp)
		for _, line := range strings.SplitAfter(tmp.String(), "\n") {
			keep := true
			for _, d := range drop {
				if strings.Contains(line, d) {
					keep = false
				}
			}
			if keep {
				s.Raw(line)
			}
		}
	}
}

// TestCheckBootContract renders the bootstrap stage with the kit's handoffs and with broken ones, for each
// provisioning utility, through plugintest.Check: the kit's pass; a no-op handoff, one that never writes the
// done marker (sdk/SPEC.md §9.4), one that never starts the setup and an Ignition handoff that leaves the units of
// the second run as presets fail, each with a message naming what is missing.
func TestCheckBootContract(t *testing.T) {
	noop := func(*node.Request, *node.Script) {}
	fcosPresetsOnly := node.FedoraCoreOSIgnition
	fcosPresetsOnly.EnableUnits = false
	tests := []struct {
		name    string
		utility string
		handoff func(*node.Request, *node.Script)
		want    []string // empty: the check passes
	}{
		{"cloud-init", abi.UtilityCloudInit, node.CloudInitHandoff(nil), nil},
		{"flatcar", abi.UtilityIgnition, node.IgnitionHandoff(node.FlatcarIgnition), nil},
		{"fedora-coreos", abi.UtilityIgnition, node.IgnitionHandoff(node.FedoraCoreOSIgnition), nil},
		{"cloud-init no-op", abi.UtilityCloudInit, noop, []string{"does not hand the configuration to cloud-init", "never creates /var/lib/osm/bootstrap.done"}},
		{"ignition no-op", abi.UtilityIgnition, noop, []string{"where Ignition reads it", "does not flag a first boot", "does not reboot",
			"units of the second Ignition run stay disabled", "never creates /var/lib/osm/bootstrap.done"}},
		{"cloud-init without done marker", abi.UtilityCloudInit, without(node.CloudInitHandoff(nil), node.BootstrapDone), []string{"never creates /var/lib/osm/bootstrap.done"}},
		{"cloud-init without setup", abi.UtilityCloudInit, without(node.CloudInitHandoff(nil), "systemctl start"), []string{"starts nothing"}},
		{"flatcar without done marker", abi.UtilityIgnition, without(node.IgnitionHandoff(node.FlatcarIgnition), node.BootstrapDone), []string{"never creates /var/lib/osm/bootstrap.done"}},
		{"fedora-coreos without done marker", abi.UtilityIgnition, without(node.IgnitionHandoff(node.FedoraCoreOSIgnition), "touch /boot/ignition.firstboot", "touch "+node.BootstrapDone),
			[]string{"never creates /var/lib/osm/bootstrap.done", "does not flag a first boot"}},
		{"fedora-coreos presets only", abi.UtilityIgnition, node.IgnitionHandoff(fcosPresetsOnly), []string{"units of the second Ignition run stay disabled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os := &node.OS{Name: "exampleos", PluginVersion: "v0.1.0", Utilities: []string{tt.utility}, CloudProviders: []string{"*"}, Handoff: tt.handoff}
			req := plugintest.Request("exampleos", "1", tt.utility, "openstack", abi.StageBootstrap)
			got := failures(t, func(tb testing.TB) { plugintest.Check(tb, plugintest.Native(node.New(os)), req) })
			if len(tt.want) == 0 && got != "" {
				t.Errorf("the check fails the kit's handoff:\n%s", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("the check lacks %q; it reported:\n%s", w, got)
				}
			}
		})
	}
}

// TestIgnitionFamilyPassesCheck: both Ignition images of the family, both stages, with a static address and
// commands, pass Check, which validates the final config with Ignition's parser.
func TestIgnitionFamilyPassesCheck(t *testing.T) {
	for name, img := range map[string]ignition.Image{"flatcar": ignition.Flatcar, "fedora-coreos": ignition.FedoraCoreOS, "microos": ignition.MicroOS} {
		for _, provider := range []string{"aws", "vsphere"} {
			for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
				t.Run(name+"/"+provider+"/"+string(stage), func(t *testing.T) {
					os := ignition.OS(img)
					os.Name, os.PluginVersion, os.CloudProviders = name, "v0.1.0", []string{"aws", "vsphere"}
					req := plugintest.Request(name, "1", abi.UtilityIgnition, provider, stage)
					if provider == "vsphere" {
						req.Context.Network = abi.Network{CIDR: "192.168.1.10/24", Gateway: "192.168.1.1", DNSServers: []string{"192.168.1.2"}}
					}
					req.Input.Modules = &abi.Modules{RunCMD: []string{"echo run"}}
					cfg := plugintest.Check(t, plugintest.Native(node.New(os)), req)
					plugintest.ValidateUserData(t, req, cfg)
				})
			}
		}
	}
}

// TestIgnitionValidateRejects proves the validator is Ignition's: a unit systemd cannot parse and a relative
// path fail.
func TestIgnitionValidateRejects(t *testing.T) {
	bad := "not a unit [[["
	for name, cfg := range map[string]*abi.NodeConfig{
		"unit":     {Units: []abi.Unit{{Name: "x.service", Content: &bad}}},
		"path":     {Files: []abi.File{abi.PlainFile("relative/path", 0o644, "x")}},
		"yum_repo": {Modules: &abi.Modules{YumRepos: map[string]map[string]string{"x": {"baseurl": "y"}}}},
	} {
		got := failures(t, func(tb testing.TB) {
			data, err := plugintest.IgnitionConfig(abi.StageProvisioning, "aws", cfg, nil)
			if err != nil {
				tb.Errorf("Ignition rejects the config: %v", err)
				return
			}
			plugintest.IgnitionValidate(tb, name, data)
		})
		if !strings.Contains(got, "Ignition rejects the config") {
			t.Errorf("%s: accepted (%q)", name, got)
		}
	}
}
