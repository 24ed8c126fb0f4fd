package app

import (
	"context"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/signature/policy"
	"github.com/osmhq/osm/host/signature/verifyproc"
)

// verification returns how plugin images are verified under the policy ConfigMap name of namespace
// (-plugin-verification-policy), or nil when no policy is named: then nothing is verified, as upstream.
// The reconcilers and the admission webhooks share it, so a module the policy refuses is loaded by neither.
// The signatures are checked in a verifier process (verifier, -plugin-verifier; package verifyproc): this
// process reads the policy and fetches the signatures, and does not link the signature libraries.
func verification(r client.Reader, namespace, name, verifier string, log logr.Logger) func(context.Context, string, string) (plugin.Verifier, error) {
	if name == "" {
		return nil
	}
	src := &policy.Source{Reader: r, Namespace: namespace, Name: name}
	run := &verifyproc.Runner{Path: verifier, Log: log}
	return func(ctx context.Context, profileNamespace, image string) (plugin.Verifier, error) {
		t, err := src.For(ctx, profileNamespace, image)
		if t == nil || err != nil {
			return nil, err // a nil *Verifier must not become a non-nil interface
		}
		return run.For(t), nil
	}
}
