package app

import (
	"fmt"
	"os"

	clientfeatures "k8s.io/client-go/features"
)

// watchListEnv is the variable through which client-go lets an operator choose how informers fill their caches.
const watchListEnv = "KUBE_FEATURE_" + string(clientfeatures.WatchListClient)

// settableGates is client-go's default feature gates (read from the environment), which can also be set.
type settableGates interface {
	Set(clientfeatures.Feature, bool) error
}

// fillCachesByListing makes the informers fill their caches with a LIST and then WATCH, as client-go did before
// v0.35 and as upstream OSM does, instead of one watch that streams the initial state (WatchListClient, on by
// default since client-go v0.35). An operator who sets KUBE_FEATURE_WatchListClient keeps what they chose.
//
// Why: kube-apiserver builds the watch cache of a custom resource on the first request for it, and until that
// cache is initialised it answers watches with 429 and Retry-After: 1 (the API server's resilient watch-cache
// initialisation), while it serves lists from etcd. OSM's own kinds (OperatingSystemConfigs, node reports,
// profile extensions) are first requested by OSM, at its start: a streaming watch then waits a whole second,
// twice (the manager's caches, then the controllers' sources), before the first render. On a fresh control
// plane that was 1.9 of the 2.6 s to the first bootstrap Secret (`make bench-controller`, 500
// MachineDeployments over five OSes; docs/measuring.md). A list is answered at once, and the watch that follows
// it retries in the background with the cache already filled. OSM's caches are restricted to its namespaces
// and labels, so the memory a streamed initial state saves on large lists is small here.
func fillCachesByListing() error {
	return preferListing(clientfeatures.FeatureGates(), os.LookupEnv)
}

// preferListing turns WatchListClient off in gates unless lookup finds the operator's choice.
func preferListing(gates clientfeatures.Gates, lookup func(string) (string, bool)) error {
	if _, chosen := lookup(watchListEnv); chosen {
		return nil
	}
	settable, ok := gates.(settableGates)
	if !ok {
		// Someone replaced client-go's gates (ReplaceFeatureGates): they decide.
		return nil
	}
	if err := settable.Set(clientfeatures.WatchListClient, false); err != nil {
		return fmt.Errorf("filling caches by listing (%s): %w", watchListEnv, err)
	}
	return nil
}
