package plugin

import (
	"errors"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/signature/policy"
	"github.com/osmhq/osm/sdk/runtime"
)

// outcome is what the controller reports for a failed plugin load: the condition reason, and whether the
// same inputs may load later (the reconciler then retries after a pause instead of waiting for a change).
type outcome struct {
	reason    string
	transient bool
}

// loadOutcomes is the one table from what failed in the runtime or the plugin host (runtime.Reason) to what
// the controller reports for a load. A load that ran out of time or memory, whose host died or was killed,
// or whose module is quarantined for a while may pass: PluginFailed, transient. A module that is not a plugin
// this host can run does not pass without a change: PluginInvalid. A reason missing here is PluginInvalid.
//
// A failed call of a module that loaded is PluginFailed and transient whatever its runtime reason (callFailure):
// the module is a plugin, and the call may have met a busy node.
var loadOutcomes = map[runtime.Reason]outcome{
	runtime.ReasonTimeout:        {osmv1alpha1.ReasonPluginFailed, true},
	runtime.ReasonCanceled:       {osmv1alpha1.ReasonPluginFailed, true},
	runtime.ReasonClosed:         {osmv1alpha1.ReasonPluginFailed, true},
	runtime.ReasonOutOfMemory:    {osmv1alpha1.ReasonPluginFailed, true},
	pluginhost.ReasonHostCrashed: {osmv1alpha1.ReasonPluginFailed, true},
	pluginhost.ReasonQuarantined: {osmv1alpha1.ReasonPluginFailed, true},

	runtime.ReasonPanic:            {osmv1alpha1.ReasonPluginInvalid, false},
	runtime.ReasonTrap:             {osmv1alpha1.ReasonPluginInvalid, false},
	runtime.ReasonInvalidOutput:    {osmv1alpha1.ReasonPluginInvalid, false},
	runtime.ReasonPluginError:      {osmv1alpha1.ReasonPluginInvalid, false},
	runtime.ReasonABIMismatch:      {osmv1alpha1.ReasonPluginInvalid, false},
	runtime.ReasonMissingExport:    {osmv1alpha1.ReasonPluginInvalid, false},
	runtime.ReasonInvalidInput:     {osmv1alpha1.ReasonPluginInvalid, false},
	runtime.ReasonInvalidModule:    {osmv1alpha1.ReasonPluginInvalid, false},
	pluginhost.ReasonCacheTampered: {osmv1alpha1.ReasonPluginInvalid, false},
}

// loadFailure is a failure to identify, pull or load ref's plugin as the render reports it: the table's
// outcome for a runtime or plugin host failure; SignatureMissing or SignatureInvalid (transient) for an image
// the verification policy refused (package signature); otherwise, before any module ran, PluginPullFailed
// (transient) for an image that could not be fetched and PluginNotFound for an unknown built-in.
func loadFailure(ref Reference, err error) *render.Error {
	if serr, refused := errors.AsType[*policy.Error](err); refused {
		// Transient: a signature may be attached, or the policy changed, without the profile changing.
		return &render.Error{Reason: serr.Reason, Err: err, Transient: true}
	}
	if r := runtime.ReasonOf(err); r != "" {
		o, ok := loadOutcomes[r]
		if !ok {
			o = outcome{osmv1alpha1.ReasonPluginInvalid, false}
		}
		return &render.Error{Reason: o.reason, Err: err, Transient: o.transient}
	}
	if ref.Image != "" {
		return &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: err, Transient: true}
	}
	return &render.Error{Reason: osmv1alpha1.ReasonPluginNotFound, Err: err}
}

// mayPass reports whether a load failure may not repeat, so the Manager must not remember it: the table says
// so, or no module ran (an error of the plugin host's transport, say). A module's host dying under it, and
// the quarantine that follows two such deaths, expire: the supervisor remembers them by digest for as long
// as they last, and remembering them here would make the quarantine permanent.
func mayPass(err error) bool {
	r := runtime.ReasonOf(err)
	return r == "" || loadOutcomes[r].transient
}

// callFailure is a failed call (err is not nil) of a loaded plugin as the render reports it: PluginFailed,
// transient.
func callFailure(err error) *render.Error {
	return &render.Error{Reason: osmv1alpha1.ReasonPluginFailed, Err: err, Transient: true}
}
