package nodereport

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

type metrics struct {
	phase    *prometheus.GaugeVec
	failures *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "osm_node_bootstrap_phase", Help: "Machines of a MachineDeployment by the bootstrap phase they last reported.",
		}, []string{"namespace", "machinedeployment", "phase"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "osm_node_bootstrap_failures_total", Help: "Machine bootstrap failures reported, by failing step (each failure once).",
		}, []string{"step"}),
	}
	if reg == nil {
		return m
	}
	for _, c := range []prometheus.Collector{m.phase, m.failures} {
		// A controller started again in the same process (tests do) replaces the series of the one before,
		// which stopped observing.
		var again prometheus.AlreadyRegisteredError
		if err := reg.Register(c); errors.As(err, &again) {
			reg.Unregister(again.ExistingCollector)
			_ = reg.Register(c)
		}
	}
	return m
}

// observe sets the phase gauges of one MachineDeployment, every phase (zero included) so a machine that moved
// on leaves no stale count.
func (m *metrics) observe(namespace, name string, s *osmv1alpha1.NodeBootstrapSummary) {
	for _, p := range append(append([]osmv1alpha1.BootstrapPhase(nil), osmv1alpha1.BootstrapPhases...), osmv1alpha1.PhaseFailed) {
		m.phase.WithLabelValues(namespace, name, string(p)).Set(float64(s.Phases[p]))
	}
}

func (m *metrics) forget(namespace, name string) {
	m.phase.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "machinedeployment": name})
}
