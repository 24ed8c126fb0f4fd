package render_test

import (
	"context"
	"errors"
	"testing"
	"time"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

// failingSource fails every resolution with err.
type failingSource struct{ err error }

func (s failingSource) Resolve(context.Context, string, *osmv1alpha1.PluginReference) (render.Plugin, error) {
	return nil, s.err
}

// pendingPull stands in for plugin.PendingError.
type pendingPull struct{}

func (pendingPull) Error() string             { return "still being pulled" }
func (pendingPull) RetryAfter() time.Duration { return 2 * time.Second }

// TestRenderErrorsSayWhetherRetryingMayHelp: a plugin source's failure renders with the source's reason and
// says it may pass exactly when the source said so (host/plugin's failure table marks a failed load or pull
// Transient); an error without a reason is RenderFailed, which does not pass; nor does a failure of the
// inputs.
func TestRenderErrorsSayWhetherRetryingMayHelp(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		reason    string
		transient bool
	}{
		{"pull failed", &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: context.DeadlineExceeded, Transient: true}, osmv1alpha1.ReasonPluginPullFailed, true},
		{"pull pending", &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: pendingPull{}, Transient: true}, osmv1alpha1.ReasonPluginPullFailed, true},
		{"load failed", &render.Error{Reason: osmv1alpha1.ReasonPluginFailed, Err: errors.New("compile: out of memory"), Transient: true}, osmv1alpha1.ReasonPluginFailed, true},
		{"pull refused for good", &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: errors.New("no pull Secret reader")}, osmv1alpha1.ReasonPluginPullFailed, false},
		{"not a plugin", &render.Error{Reason: osmv1alpha1.ReasonPluginInvalid, Err: errors.New("no osm_render export")}, osmv1alpha1.ReasonPluginInvalid, false},
		{"unknown built-in", &render.Error{Reason: osmv1alpha1.ReasonPluginNotFound, Err: errors.New("no built-in x")}, osmv1alpha1.ReasonPluginNotFound, false},
		{"no reason", errors.New("no such plugin"), osmv1alpha1.ReasonRenderFailed, false},
	} {
		osp := secretProfile(t, abi.UtilityCloudInit)
		osp.Spec.Plugin.Secrets = nil
		_, err := (&render.Renderer{Plugins: failingSource{tc.err}}).Render(context.Background(), render.Input{
			MachineDeployment: upstreamMD(t, "workers", osp.Name, "1.33.2", "ubuntu", "aws", `{}`), Profile: osp,
			Cluster: render.ClusterInfo{ServerURL: "https://api:6443", CACert: "ca"}, Settings: upstreamSettings(true)})
		if render.Reason(err) != tc.reason || render.Transient(err) != tc.transient {
			t.Errorf("%s: reason %s transient %v, want %s %v (%v)", tc.name, render.Reason(err), render.Transient(err), tc.reason, tc.transient, err)
		}
		var pending interface{ RetryAfter() time.Duration }
		if tc.name == "pull pending" && !errors.As(err, &pending) {
			t.Errorf("%s: the pending pull is lost: %v", tc.name, err)
		}
	}
	osp := secretProfile(t, abi.UtilityCloudInit)
	osp.Spec.Plugin.Secrets = nil
	osp.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = "{{ .NoSuchField }}"
	_, err := renderSecretProfile(t, osp, secretPlugins{"main": {name: "main"}, "pipe": {name: "pipe"}})
	if render.Reason(err) != osmv1alpha1.ReasonTemplateError || render.Transient(err) {
		t.Errorf("a template error: reason %s transient %v (%v)", render.Reason(err), render.Transient(err), err)
	}
}
