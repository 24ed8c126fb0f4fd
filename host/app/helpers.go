package app

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/osmhq/osm/host/clusterinfo"
	"github.com/osmhq/osm/host/containerd"
	"github.com/osmhq/osm/host/render"
)

// clusterInfoTTL bounds how long the cluster's URL and CA are reused before being read again; a CA rotation is
// picked up within it.
const clusterInfoTTL = 5 * time.Minute

// cachedClusterInfo reads the cluster info at most once per clusterInfoTTL; reading it per reconcile would cost
// an API call per MachineDeployment for a value that almost never changes.
func cachedClusterInfo(c client.Reader, fallbackCA []byte, overrideCA string) func(context.Context) (render.ClusterInfo, error) {
	var (
		mu   sync.Mutex
		info render.ClusterInfo
		at   time.Time
	)
	return func(ctx context.Context) (render.ClusterInfo, error) {
		mu.Lock()
		defer mu.Unlock()
		if !at.IsZero() && time.Since(at) < clusterInfoTTL {
			return info, nil
		}
		fresh, err := clusterinfo.Get(ctx, c, fallbackCA)
		if err != nil {
			return render.ClusterInfo{}, err
		}
		if overrideCA != "" {
			fresh.CACert = overrideCA
		}
		info, at = fresh, time.Now()
		return info, nil
	}
}

// registryCredentials reads -node-registry-credentials-secret once to learn which registries have credentials
// (that shapes the rendered containerd config), and returns a function that reads the current credentials each
// time user-data is written, so a rotated password reaches new machines without a restart.
func registryCredentials(ctx context.Context, c client.Reader, ref string) (func(context.Context) (string, error), []string, error) {
	none := func(context.Context) (string, error) { return "", nil }
	if ref == "" {
		return none, nil, nil
	}
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		return nil, nil, fmt.Errorf("-node-registry-credentials-secret %q: want namespace/name", ref)
	}
	read := func(ctx context.Context) (map[string]containerd.RegistryAuth, error) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return nil, fmt.Errorf("reading registry credentials %s: %w", ref, err)
		}
		data, ok := s.Data[corev1.DockerConfigJsonKey]
		if !ok {
			return nil, fmt.Errorf("registry credentials %s: no %s key", ref, corev1.DockerConfigJsonKey)
		}
		return containerd.ParseDockerConfig(data)
	}
	auths, err := read(ctx)
	if err != nil {
		return nil, nil, err
	}
	var hosts []string
	for h := range auths {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return func(ctx context.Context) (string, error) {
		auths, err := read(ctx)
		if err != nil {
			return "", err
		}
		return containerd.AuthTOML(auths)
	}, hosts, nil
}

// enableContentionProfiles turns on the block and mutex profiles pprof serves, and the heap profile if
// SetGCDefaults turned it off. They sample every blocking event
// over 10µs and one mutex contention in 10, which costs a few percent of CPU: only with -pprof-address.
func enableContentionProfiles() {
	runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	runtime.SetMutexProfileFraction(10)
	if runtime.MemProfileRate == 0 {
		runtime.MemProfileRate = heapProfileRate
	}
}

// DefaultGCPercent is the GC target osm-controller runs with unless GOGC is set. Most of the live heap is
// long-lived (informer caches, the plugin output memo), so the default of 100 mostly doubles memory that never
// becomes garbage. Measured with make bench-baseline on 2026-11-27 (500 MachineDeployments, medians of 3): 100
// instead of 50 took 8% more peak RSS (144 against 133 MiB) and saved 18% of the controller's CPU (2.3 against
// 2.8 s). On 2026-11-28 (500 over five OSes, medians of 5, `make bench-baseline`), 65 instead of 50 took 2%
// more (104 against 102 MiB) for 6% less CPU of the process tree (3.0 against 3.2 s); 100 had taken the peak
// past 0.95x upstream OSM's. GOGC in the environment overrides it.
const DefaultGCPercent = 65

// SetGCDefaults applies DefaultGCPercent unless the environment sets GOGC, and turns heap profiling off
// unless GODEBUG sets memprofilerate (New turns it back on with -pprof-address). The process calls it once
// at start.
//
// Heap profiling records the call stack of one allocation per 512 KiB, and unwinding those stacks reads the
// executable's function tables: pages of it that then stay resident. Off, a start of 500 MachineDeployments
// peaked at 111 instead of 115 MiB (make bench-compare with GODEBUG=memprofilerate=0, medians of 2 against
// 3, 2026-11-27).
func SetGCDefaults() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(DefaultGCPercent)
	}
	if !strings.Contains(os.Getenv("GODEBUG"), "memprofilerate=") {
		runtime.MemProfileRate = 0
	}
}

// heapProfileRate is Go's default runtime.MemProfileRate, which -pprof-address restores.
const heapProfileRate = 512 << 10
