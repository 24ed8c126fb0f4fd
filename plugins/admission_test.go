package plugins_test

import (
	"context"
	"testing"

	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/validation"
	"github.com/osmhq/osm/plugins"
)

// TestDefaultProfilesPassAdmission runs every default profile through the admission webhook's full review (plugin
// support, osm_validate, a trial render for every cloud provider) with the built plugins. The webhook itself
// admits a profile whose spec is exactly a shipped one without that review (validation.ProfileValidator.Shipped),
// so that installing the defaults never waits for a plugin to compile: this test is why it may.
func TestDefaultProfilesPassAdmission(t *testing.T) {
	profiles, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	v := &validation.ProfileValidator{Plugins: newSource(t, dist(t)), Settings: render.DefaultSettings()}
	for _, osp := range profiles {
		errs, warnings := v.Review(context.Background(), osp)
		if len(errs) > 0 || len(warnings) > 0 {
			t.Errorf("%s: errors %v, warnings %q", osp.Name, errs.ToAggregate(), warnings)
		}
	}
}
