package plugin

import (
	"errors"
	"fmt"
	"testing"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/signature/policy"
	"github.com/osmhq/osm/sdk/runtime"
)

// TestFailureTable: what the reconciler reports for a failed load or call, read through render.Reason and
// render.Transient as the reconciler's taxonomy (host/controllers/internal/failure) reads it.
func TestFailureTable(t *testing.T) {
	rerr := func(r runtime.Reason) error {
		return fmt.Errorf("loading: %w", &runtime.Error{Plugin: "p", Reason: r, Detail: string(r)})
	}
	builtin, image := Reference{Builtin: "ubuntu"}, Reference{Image: "registry.invalid/os@sha256:00"}
	for _, tc := range []struct {
		name      string
		err       *render.Error
		reason    string
		transient bool
	}{
		{"load timed out", loadFailure(builtin, rerr(runtime.ReasonTimeout)), osmv1alpha1.ReasonPluginFailed, true},
		{"load out of memory", loadFailure(builtin, rerr(runtime.ReasonOutOfMemory)), osmv1alpha1.ReasonPluginFailed, true},
		{"host crashed", loadFailure(image, rerr(pluginhost.ReasonHostCrashed)), osmv1alpha1.ReasonPluginFailed, true},
		{"quarantined", loadFailure(builtin, rerr(pluginhost.ReasonQuarantined)), osmv1alpha1.ReasonPluginFailed, true},
		{"not a module", loadFailure(image, rerr(runtime.ReasonInvalidModule)), osmv1alpha1.ReasonPluginInvalid, false},
		{"other ABI", loadFailure(builtin, rerr(runtime.ReasonABIMismatch)), osmv1alpha1.ReasonPluginInvalid, false},
		{"unknown reason", loadFailure(builtin, rerr("SomethingNew")), osmv1alpha1.ReasonPluginInvalid, false},
		{"pull failed", loadFailure(image, errors.New("connection refused")), osmv1alpha1.ReasonPluginPullFailed, true},
		{"unknown built-in", loadFailure(builtin, errors.New("no built-in plugin")), osmv1alpha1.ReasonPluginNotFound, false},
		{"signature refused", loadFailure(image, &policy.Error{Reason: osmv1alpha1.ReasonSignatureMissing}), osmv1alpha1.ReasonSignatureMissing, true},
		{"call trapped", callFailure(rerr(runtime.ReasonTrap)), osmv1alpha1.ReasonPluginFailed, true},
		{"call refused by the plugin", callFailure(rerr(runtime.ReasonPluginError)), osmv1alpha1.ReasonPluginFailed, true},
	} {
		if got, tr := render.Reason(tc.err), render.Transient(tc.err); got != tc.reason || tr != tc.transient {
			t.Errorf("%s: reason %s transient %v, want %s %v", tc.name, got, tr, tc.reason, tc.transient)
		}
		if !errors.Is(tc.err, tc.err.Err) {
			t.Errorf("%s: the cause is lost", tc.name)
		}
	}
}

// TestFailedLoadsRememberedOnlyWhenTheyRepeat: the Manager remembers a failed load exactly when the table
// says it does not pass, and never one that ran no module.
func TestFailedLoadsRememberedOnlyWhenTheyRepeat(t *testing.T) {
	for reason, o := range loadOutcomes {
		if mayPass(&runtime.Error{Reason: reason}) != o.transient {
			t.Errorf("%s: mayPass %v, table says transient %v", reason, !o.transient, o.transient)
		}
		if (o.reason == osmv1alpha1.ReasonPluginFailed) != o.transient {
			t.Errorf("%s: %s but transient %v", reason, o.reason, o.transient)
		}
	}
	if !mayPass(errors.New("broken pipe")) {
		t.Error("a failure that ran no module is remembered")
	}
}
