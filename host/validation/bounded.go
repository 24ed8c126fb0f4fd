package validation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

// AdmissionPluginWait is how long an admission review waits for a plugin to load (pull, check, compile) before
// it answers without the checks that need the plugin. The webhooks' timeout is 30 s (webhooks.Configurations);
// compiling a default plugin takes seconds on an idle core, and tens of seconds on a busy one or under -race,
// which must never reach the API server as a timed-out webhook.
const AdmissionPluginWait = 5 * time.Second

// backgroundLoadTimeout bounds a load that outlived its review: it goes on so the module is compiled (and kept
// loaded until the plugin manager's idle timeout) for the next review and the first render. It covers the
// pull timeout (60 s) and a compile on a busy machine.
const backgroundLoadTimeout = 3 * time.Minute

// loadedGrace is what a resolution gets once the review's bound has passed: enough for a plugin that is
// loaded, not for a compile.
const loadedGrace = 250 * time.Millisecond

// PluginLoadingError says a plugin did not load within an admission review's bound. The review then answers
// with the checks that need no plugin and an admission warning (see LoadingWarning); the load goes on in the
// background.
type PluginLoadingError struct {
	// Ref names the plugin (builtin:<name> or the image).
	Ref string
	// Wait is the bound that passed.
	Wait time.Duration
}

func (e *PluginLoadingError) Error() string {
	return fmt.Sprintf("plugin %s is still loading (pulling or compiling) after %s", e.Ref, e.Wait)
}

// warning is the admission warning for a review that could not wait for the plugin at path.
func (e *PluginLoadingError) warning(path string) string {
	return fmt.Sprintf("%s: %s, so admission checked the structure and templates only, not the plugin's support for "+
		"this profile or a render with it; the controller reports that in the profile's status conditions "+
		"(PluginResolved, Ready) and, at the first render, in the OperatingSystemConfig's conditions and the "+
		"MachineDeployment's events. Apply again once the plugin is loaded for the full check", path, e.Error())
}

// bounded is a PluginSource that waits for its source's resolutions only until deadline. A resolution still
// running then goes on, detached from the review's context (and bounded by backgroundLoadTimeout), so that the
// module ends up compiled and loaded; its plugin is left to the manager's idle timeout rather than discarded,
// since the review that asked for it admitted the profile.
type bounded struct {
	src      render.PluginSource
	deadline time.Time
	wait     time.Duration
}

func newBounded(src render.PluginSource, wait time.Duration) *bounded {
	return &bounded{src: src, deadline: time.Now().Add(wait), wait: wait}
}

func (b *bounded) Resolve(ctx context.Context, namespace string, ref *osmv1alpha1.PluginReference) (render.Plugin, error) {
	type result struct {
		p   render.Plugin
		err error
	}
	done := make(chan result, 1)
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), backgroundLoadTimeout)
	go func() {
		defer cancel()
		p, err := b.src.Resolve(bg, namespace, ref)
		done <- result{p, err}
	}()
	// Past the deadline (a review that resolves several plugins), a loaded plugin still gets a moment to answer.
	timer := time.NewTimer(max(time.Until(b.deadline), loadedGrace))
	defer timer.Stop()
	select {
	case r := <-done:
		return r.p, r.err
	case <-timer.C:
	case <-ctx.Done():
	}
	// The quick failures (an unknown built-in, a malformed reference) are back long before the bound; what is
	// left is a pull or a compile.
	select {
	case r := <-done:
		return r.p, r.err
	default:
	}
	return nil, &PluginLoadingError{Ref: pluginRef(ref), Wait: b.wait}
}

// standIn takes the place of a plugin that is still loading, for a trial render of the profile's templates: it
// claims to support the profile and returns what the templates produced. The trial then reports only template
// errors, which do not depend on the plugin (templates run before it).
type standIn struct{ md abi.Metadata }

func newStandIn(osp *osmv1alpha1.OperatingSystemProfile) standIn {
	utility := string(osp.Spec.ProvisioningUtility)
	if utility == "" {
		utility = abi.UtilityCloudInit
	}
	return standIn{md: abi.Metadata{ABIVersion: abi.Version, Name: "stand-in", Version: "v0.0.0",
		OperatingSystems:      []abi.OperatingSystem{{Name: string(osp.Spec.OSName)}},
		ProvisioningUtilities: []string{utility}, CloudProviders: []string{"*"}}}
}

func (s standIn) Metadata() abi.Metadata { return s.md }

func (standIn) Identity() osmv1alpha1.ResolvedPlugin {
	return osmv1alpha1.ResolvedPlugin{Name: "stand-in"}
}

func (standIn) Render(_ context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	return &abi.RenderResponse{ABIVersion: abi.Version, Config: req.Input}, nil
}

func (standIn) Encode(context.Context, *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	return nil, fmt.Errorf("the plugin is still loading")
}

// shippedSpecs indexes the specs of the profiles a build ships by their JSON.
func shippedSpecs(profiles []*osmv1alpha1.OperatingSystemProfile) map[string]bool {
	out := make(map[string]bool, len(profiles))
	for _, p := range profiles {
		if data, err := json.Marshal(p.Spec); err == nil {
			out[string(data)] = true
		}
	}
	return out
}
