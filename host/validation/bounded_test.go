package validation_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/validation"
)

// slowSource stands for a plugin manager compiling a module: Resolve blocks until release is closed (or its
// context ends), and fails fast for the built-in "missing".
type slowSource struct {
	release chan struct{}
	calls   atomic.Int32
}

func (s *slowSource) Resolve(ctx context.Context, _ string, ref *osmv1alpha1.PluginReference) (render.Plugin, error) {
	s.calls.Add(1)
	if ref.Builtin == "missing" {
		return nil, errors.New(`unknown built-in plugin "missing"`)
	}
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return nil, errors.New("compiled, but this test has no plugin")
}

func withPlugin(t *testing.T, builtin string) *osmv1alpha1.OperatingSystemProfile {
	osp := profile(t, "osp-minimal.yaml")
	osp.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: builtin}
	return osp
}

// TestReviewDoesNotWaitForACompile: a review whose plugin is not loaded within PluginWait answers at once with
// the checks that need no plugin (structure, templates) and a warning, instead of waiting for the compile.
func TestReviewDoesNotWaitForACompile(t *testing.T) {
	src := &slowSource{release: make(chan struct{})}
	t.Cleanup(func() { close(src.release) })
	v := &validation.ProfileValidator{Plugins: src, Settings: render.DefaultSettings(), PluginWait: 200 * time.Millisecond}

	start := time.Now()
	errs, warnings := v.Review(context.Background(), withPlugin(t, "slow"))
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("review took %s, want about PluginWait", took)
	}
	if len(errs) > 0 {
		t.Errorf("errors: %v", errs.ToAggregate())
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "spec.plugin.builtin: plugin builtin:slow is still loading") ||
		!strings.Contains(warnings[0], "status conditions") {
		t.Errorf("warnings = %q, want one saying the plugin is still loading and where the outcome is reported", warnings)
	}

	t.Run("template errors are still found", func(t *testing.T) {
		osp := withPlugin(t, "slow")
		osp.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = "{{ .NoSuchField }}"
		errs, warnings := v.Review(context.Background(), osp)
		if len(errs) != 1 || errs[0].Field != "spec.provisioningConfig.files[0].content.inline.data" || !strings.Contains(errs[0].Error(), "NoSuchField") {
			t.Errorf("errors = %v, want the template's field", errs.ToAggregate())
		}
		if len(warnings) != 1 {
			t.Errorf("warnings = %q", warnings)
		}
	})

	t.Run("a plugin that fails fast is still an error", func(t *testing.T) {
		errs, warnings := v.Review(context.Background(), withPlugin(t, "missing"))
		if len(errs) != 1 || errs[0].Field != "spec.plugin.builtin" || len(warnings) != 0 {
			t.Errorf("errors = %v, warnings = %q; want spec.plugin.builtin rejected", errs.ToAggregate(), warnings)
		}
	})

	t.Run("without PluginWait the review waits", func(t *testing.T) {
		unbounded := &validation.ProfileValidator{Plugins: src, Settings: render.DefaultSettings()}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		errs, warnings := unbounded.Review(ctx, withPlugin(t, "slow"))
		if len(errs) != 1 || errs[0].Field != "spec.plugin.builtin" || len(warnings) != 0 {
			t.Errorf("errors = %v, warnings = %q; want the resolution's failure", errs.ToAggregate(), warnings)
		}
	})
}

// TestShippedProfilesNeedNoPlugin: a profile whose spec is exactly a shipped one is admitted without resolving
// its plugin (the build tests it), so installing the defaults never waits for a compile; a changed one is not.
func TestShippedProfilesNeedNoPlugin(t *testing.T) {
	src := &slowSource{release: make(chan struct{})}
	t.Cleanup(func() { close(src.release) })
	shipped := withPlugin(t, "slow")
	v := &validation.ProfileValidator{Plugins: src, Settings: render.DefaultSettings(), PluginWait: 100 * time.Millisecond,
		Shipped: []*osmv1alpha1.OperatingSystemProfile{shipped}}

	same := shipped.DeepCopy()
	same.Name, same.Namespace = "osp-copy", "elsewhere"
	errs, warnings := v.Review(context.Background(), same)
	if len(errs) > 0 || len(warnings) > 0 || src.calls.Load() != 0 {
		t.Errorf("shipped spec: errors %v, warnings %q, %d resolutions; want none", errs.ToAggregate(), warnings, src.calls.Load())
	}

	changed := shipped.DeepCopy()
	changed.Spec.Version = "v9.9.9"
	if _, warnings := v.Review(context.Background(), changed); len(warnings) != 1 || src.calls.Load() != 1 {
		t.Errorf("changed spec: warnings %q, %d resolutions; want the plugin resolved (and still loading)", warnings, src.calls.Load())
	}
}

// TestExtensionReviewDoesNotWaitForACompile: an extension review needing a plugin that is not loaded within
// PluginWait skips the trial renders with a warning.
func TestExtensionReviewDoesNotWaitForACompile(t *testing.T) {
	src := &slowSource{release: make(chan struct{})}
	t.Cleanup(func() { close(src.release) })
	v := &validation.ExtensionValidator{Plugins: src, Settings: render.DefaultSettings(), PluginWait: 200 * time.Millisecond}
	osp := withPlugin(t, "slow")
	x := &osmv1alpha1.OperatingSystemProfileExtension{}
	x.Name, x.Namespace = "site", osp.Namespace
	x.Spec.Selector.Names = []string{osp.Name}
	x.Spec.ProvisioningConfig = &osmv1alpha1.ExtensionConfig{Files: []osmv1alpha1.File{{Path: "/etc/site",
		Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "site"}}}}}

	start := time.Now()
	errs, warnings := v.Review(context.Background(), x, []osmv1alpha1.OperatingSystemProfile{*osp}, nil)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("review took %s, want about PluginWait", took)
	}
	if len(errs) > 0 || len(warnings) != 1 || !strings.Contains(warnings[0], "still loading") || !strings.Contains(warnings[0], osp.Name) {
		t.Errorf("errors %v, warnings %q; want one warning naming the profile whose trial was skipped", errs.ToAggregate(), warnings)
	}
}
