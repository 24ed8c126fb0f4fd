package osc

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/controllers/internal/failure"
)

type metrics struct {
	renders   *prometheus.HistogramVec
	outcomes  *prometheus.CounterVec
	userData  *prometheus.HistogramVec
	skipped   prometheus.Counter
	reconcile prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		renders: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "osm_render_duration_seconds", Help: "Time to render a MachineDeployment's configuration (templates, plugin, encoding), by result.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"result"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "osm_machinedeployment_reconciles_total", Help: "MachineDeployment reconciles by outcome (the condition reason).",
		}, []string{"reason"}),
		userData: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "osm_userdata_bytes", Help: "Size of the user-data written, by stage.",
			Buckets: prometheus.ExponentialBuckets(1024, 2, 10),
		}, []string{"stage"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "osm_render_skipped_total", Help: "Reconciles that found everything current and neither rendered nor wrote.",
		}),
		reconcile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "osm_machinedeployment_reconcile_seconds", Help: "Time of a MachineDeployment reconcile.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.renders, m.outcomes, m.userData, m.skipped, m.reconcile} {
			// A second reconciler in the same process (tests restarting the controller) registers the same
			// series again; the first registration keeps counting for both.
			_ = reg.Register(c)
		}
	}
	return m
}

func (m *metrics) observe(st *state, err error, took time.Duration) {
	if m == nil {
		return
	}
	m.reconcile.Observe(took.Seconds())
	reason := "Succeeded"
	if f := failure.Of(err); f != nil {
		reason = f.Reason
		if f.Action == failure.Outdated {
			reason = "Outdated" // not reported on the OSC: a write met a newer object than the cache showed
		}
	}
	m.outcomes.WithLabelValues(reason).Inc()
	switch {
	case st.done:
		m.skipped.Inc()
	case st.output != nil:
		m.renders.WithLabelValues(reason).Observe(st.renderTook.Seconds())
		if st.bootstrapSize > 0 {
			m.userData.WithLabelValues("bootstrap").Observe(float64(st.bootstrapSize))
			m.userData.WithLabelValues("provisioning").Observe(float64(st.provisioningSize))
		}
	}
}
