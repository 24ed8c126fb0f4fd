package app

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
)

// The informer caches hold what reconciling needs and nothing more; at 500 MachineDeployments they were the
// largest per-MachineDeployment cost of the controller's memory (see hack/bench/README.md for the figures).
// Every object is read through these caches on every reconcile and deep-copied on each read, so what they hold
// also costs allocation and GC time.

// mgmtCacheOptions configures the cache of the cluster holding profiles and OSCs.
func mgmtCacheOptions(namespace string) cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			// OSM writes OSCs only in its namespace, and reads their metadata only (see osc.OSCMeta).
			osc.OSCMeta(): {Namespaces: map[string]cache.Config{namespace: {}}},
		},
	}
}

// workerCacheOptions configures the cache of the cluster holding MachineDeployments and user-data Secrets.
// Secrets are cached only where OSM writes them: the user-data namespace, and its own bootstrap tokens in
// kube-system. Caching every Secret of a cluster would cost memory and need broad RBAC.
func workerCacheOptions(cloudInitNS string) cache.Options {
	owned, _ := labels.NewRequirement(credentials.LabelMachineDeployment, selection.Exists, nil)
	strip := cache.TransformStripManagedFields()
	return cache.Options{
		DefaultTransform: strip,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{
				cloudInitNS:   {Transform: chain(strip, digestUserData)},
				"kube-system": {LabelSelector: labels.NewSelector().Add(*owned), Transform: strip},
			}},
			// The reader Roles and RoleBindings, metadata only: the reconciler needs to know that they exist.
			credentials.ReaderRoleMeta():    {Namespaces: map[string]cache.Config{cloudInitNS: {LabelSelector: labels.NewSelector().Add(*owned)}}},
			credentials.ReaderBindingMeta(): {Namespaces: map[string]cache.Config{cloudInitNS: {LabelSelector: labels.NewSelector().Add(*owned)}}},
			// The nodes' bootstrap reports live beside the provisioning Secrets.
			&osmv1alpha1.OperatingSystemNodeReport{}: {Namespaces: map[string]cache.Config{cloudInitNS: {}}},
		},
	}
}

// sameClusterCacheOptions is both when one cluster holds everything.
func sameClusterCacheOptions(namespace, cloudInitNS string) cache.Options {
	opts := workerCacheOptions(cloudInitNS)
	for obj, by := range mgmtCacheOptions(namespace).ByObject {
		opts.ByObject[obj] = by
	}
	return opts
}

// cachedDigestPrefix marks a user-data value the cache replaced by its digest.
const cachedDigestPrefix = "osm-cache-sha256:"

// digestUserData replaces the rendered user-data of a cached Secret (the largest value, 4–20 KiB) by its
// sha256. The reconciler decides whether user-data is current from the render-hash annotation, and keeps the
// small values it compares (provisioning token, kubelet kubeconfig) as they are; a changed user-data still
// changes the digest, so its watch still sees the change.
func digestUserData(in any) (any, error) {
	if s, ok := in.(*corev1.Secret); ok {
		if v, ok := s.Data[render.CloudConfigKey]; ok {
			sum := sha256.Sum256(v)
			s.Data[render.CloudConfigKey] = []byte(cachedDigestPrefix + hex.EncodeToString(sum[:]))
		}
	}
	return in, nil
}

func chain(fs ...toolscache.TransformFunc) toolscache.TransformFunc {
	return func(in any) (any, error) {
		var err error
		for _, f := range fs {
			if in, err = f(in); err != nil {
				return nil, err
			}
		}
		return in, nil
	}
}
