package rollout

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/osc"
)

// registerMetrics registers gauges computed from the caches when scraped, so that they are never stale:
// osm_machinedeployments_drifted, osm_machinedeployments_rolling and osm_machinedeployments_rollout_queued.
func (r *Reconciler) registerMetrics(reg prometheus.Registerer) {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "osm_machinedeployments_drifted",
			Help: "MachineDeployments whose current revision's machines were provisioned from a configuration other than the one OSM renders now (OSC condition Drifted).",
		}, r.countDrifted),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "osm_machinedeployments_rolling",
			Help: "MachineDeployments whose rollout, started by OSM, machine-controller has not finished (bounded by -rollout-max-concurrent).",
		}, r.countRolling),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "osm_machinedeployments_rollout_queued",
			Help: "Drifted MachineDeployments under the rollout policy waiting for -rollout-max-concurrent.",
		}, func() float64 {
			r.mu.Lock()
			defer r.mu.Unlock()
			return float64(len(r.queued))
		}),
	} {
		// A controller started again in the same process (tests do) replaces the gauges of the one before,
		// which read caches that are gone.
		var again prometheus.AlreadyRegisteredError
		if err := reg.Register(c); errors.As(err, &again) {
			reg.Unregister(again.ExistingCollector)
			_ = reg.Register(c)
		}
	}
}

func (r *Reconciler) countDrifted() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(osmv1alpha1.GroupVersion.WithKind("OperatingSystemConfigList"))
	if err := r.Mgmt.List(ctx, list, client.InNamespace(r.Namespace)); err != nil {
		return 0
	}
	n := 0
	for _, o := range list.Items {
		if o.Annotations[osc.AnnotationDriftedSince] != "" {
			n++
		}
	}
	return float64(n)
}

func (r *Reconciler) countRolling() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &clusterv1alpha1.MachineDeploymentList{}
	if err := r.Worker.List(ctx, list); err != nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i := range list.Items {
		if r.rolling(&list.Items[i]) {
			n++
		}
	}
	return float64(n)
}
