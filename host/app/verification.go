package app

import (
	"context"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/signature"
)

// verification returns how plugin images are verified under the policy ConfigMap name of namespace
// (-plugin-verification-policy), or nil when no policy is named: then nothing is verified, as upstream.
// The reconcilers and the admission webhooks share it, so a module the policy refuses is loaded by neither.
func verification(r client.Reader, namespace, name string, log logr.Logger) func(context.Context, string, string) (plugin.Verifier, error) {
	if name == "" {
		return nil
	}
	src := &signature.PolicySource{Reader: r, Namespace: namespace, Name: name, Log: log}
	return func(ctx context.Context, profileNamespace, image string) (plugin.Verifier, error) {
		v, err := src.For(ctx, profileNamespace, image)
		if v == nil || err != nil {
			return nil, err // a nil *Verifier must not become a non-nil interface
		}
		return v, nil
	}
}
