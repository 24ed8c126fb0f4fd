package plugins_test

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/plugins/pluginstest"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/plugintest"
)

// TestSnapshotsRenderWhatFreshInstancesRender: every default profile, for each of its cloud providers, renders
// byte for byte the same user-data whether the plugin's instances start from the snapshot of an initialised,
// warmed-up instance (what the controller runs) or initialise themselves, as every instance did before
// snapshots: the warm-up leaves nothing a render can see. With -short (make unit), one cloud provider per
// profile: each module is still compared, and the fresh instances, which initialise the Go runtime of the
// plugin at every call (seconds each on a busy machine), stay within the fast loop's budget.
func TestSnapshotsRenderWhatFreshInstancesRender(t *testing.T) {
	profiles, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	renderer := func(noSnapshot bool) *render.Renderer {
		m, err := plugin.New(plugin.Config{CacheDir: pluginstest.CacheDir(t), Precompiled: plugins.PrecompiledDir(), NoSnapshot: noSnapshot}, dist(t), prometheus.NewRegistry(), logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close(context.Background()) })
		return &render.Renderer{Plugins: &plugin.Resolver{Manager: m}}
	}
	snapshot, fresh := renderer(false), renderer(true)
	userData := func(t *testing.T, r *render.Renderer, in render.Input) map[abi.Stage]string {
		out, err := r.Render(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		got := map[abi.Stage]string{}
		for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
			data, err := out.UserData(context.Background(), stage, secrets)
			if err != nil {
				t.Fatal(err)
			}
			got[stage] = string(data)
		}
		return got
	}
	for _, osp := range profiles {
		for i, cp := range osp.Spec.SupportedCloudProviders {
			if testing.Short() && i > 0 {
				break
			}
			t.Run(osp.Name+"/"+cp.Name, func(t *testing.T) {
				in := render.Input{MachineDeployment: machineDeployment(t, osp, cp.Name), Profile: osp, Settings: settings(),
					Cluster: render.ClusterInfo{ServerURL: "https://api.cluster.example.com:6443", CACert: plugintest.CACert}}
				if diff := cmp.Diff(userData(t, fresh, in), userData(t, snapshot, in)); diff != "" {
					t.Errorf("user-data differs (-fresh instance +snapshot):\n%s", diff)
				}
			})
		}
	}
}
