//go:build machinecontroller

package machinecontroller

import (
	"context"
	"encoding/base64"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/controllers/rollout"
)

// sampler watches, from the moment the profile is bumped, how many MachineDeployments roll at once, two ways:
//
//   - rolling: OSM's rollout annotation is in the template and machine-controller's status is not complete
//     (what -rollout-max-concurrent bounds);
//   - replacing: seen from the machines, the MachineDeployment has live machines of more than one MachineSet,
//     or a live machine without a node.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	res samplerResult
}

type samplerResult struct {
	samples                               int
	maxRolling, maxReplacing, maxMachines int
	// first and last are when each MachineDeployment was first and last seen rolling.
	first, last map[string]time.Time
}

// order lists the MachineDeployments seen rolling, by when they started.
func (r samplerResult) order() []string {
	var names []string
	for n := range r.first {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return r.first[names[i]].Before(r.first[names[j]]) })
	return names
}

func startSampler(ctx context.Context, c client.Client) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{}), res: samplerResult{first: map[string]time.Time{}, last: map[string]time.Time{}}}
	go func() {
		defer close(s.done)
		for {
			s.sample(ctx, c)
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) sample(ctx context.Context, c client.Client) {
	mds := &clusterv1alpha1.MachineDeploymentList{}
	sets, machines := &unstructured.UnstructuredList{}, &unstructured.UnstructuredList{}
	sets.SetAPIVersion("cluster.k8s.io/v1alpha1")
	sets.SetKind("MachineSetList")
	machines.SetAPIVersion("cluster.k8s.io/v1alpha1")
	machines.SetKind("MachineList")
	if c.List(ctx, mds, client.InNamespace(namespace)) != nil || c.List(ctx, sets, client.InNamespace(namespace)) != nil ||
		c.List(ctx, machines, client.InNamespace(namespace)) != nil {
		return
	}
	now := time.Now()
	setOwner := map[string]string{}
	for _, ms := range sets.Items {
		setOwner[ms.GetName()] = controllerOf(ms)
	}
	liveSets, noNode, count := map[string]map[string]bool{}, map[string]bool{}, map[string]int{}
	for _, m := range machines.Items {
		if m.GetDeletionTimestamp() != nil {
			continue
		}
		set := controllerOf(m)
		md := setOwner[set]
		if liveSets[md] == nil {
			liveSets[md] = map[string]bool{}
		}
		liveSets[md][set] = true
		count[md]++
		if node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name"); node == "" {
			noNode[md] = true
		}
	}
	rolling, replacing, most := 0, 0, 0
	for i := range mds.Items {
		md := &mds.Items[i]
		if md.Spec.Template.Annotations[rollout.AnnotationRollout] != "" && !rollout.Finished(md) {
			rolling++
			s.mu.Lock()
			if _, ok := s.res.first[md.Name]; !ok {
				s.res.first[md.Name] = now
			}
			s.res.last[md.Name] = now
			s.mu.Unlock()
		}
		if len(liveSets[md.Name]) > 1 || noNode[md.Name] {
			replacing++
		}
		most = max(most, count[md.Name])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res.samples++
	s.res.maxRolling = max(s.res.maxRolling, rolling)
	s.res.maxReplacing = max(s.res.maxReplacing, replacing)
	s.res.maxMachines = max(s.res.maxMachines, most)
}

func (s *sampler) stop() {
	s.cancel()
	<-s.done
}

func (s *sampler) result() samplerResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }
