package plugin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/internal/metricsreg"
	"github.com/osmhq/osm/sdk/runtime"
)

// ReasonPullError labels failures to fetch a plugin image, next to the runtime's reasons.
const ReasonPullError runtime.Reason = "PullError"

// metrics are the plugin metrics of the controller.
type metrics struct {
	compile   *prometheus.HistogramVec
	calls     *prometheus.HistogramVec
	failures  *prometheus.CounterVec
	cacheHits *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		compile: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "osm_plugin_compile_seconds",
			Help:    "Time to compile a plugin module, from the disk cache (cache=disk) or from scratch (cache=none).",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16},
		}, []string{"plugin", "cache"}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "osm_plugin_call_duration_seconds",
			Help:    "Duration of plugin export calls, including failed ones.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"plugin", "export"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "osm_plugin_failures_total",
			Help: "Failed plugin loads and calls by reason (Timeout, OutOfMemory, Panic, Trap, InvalidOutput, PluginError, ABIMismatch, MissingExport, InvalidModule, PullError, ...).",
		}, []string{"plugin", "reason"}),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "osm_plugin_cache_hits_total",
			Help: "Plugin loads served from a cache layer: memory (already loaded), disk (compiled code), oci (pulled artifact).",
		}, []string{"layer"}),
	}
	var err error
	if m.compile, err = metricsreg.Register(reg, m.compile); err != nil {
		return nil, err
	}
	if m.calls, err = metricsreg.Register(reg, m.calls); err != nil {
		return nil, err
	}
	if m.failures, err = metricsreg.Register(reg, m.failures); err != nil {
		return nil, err
	}
	if m.cacheHits, err = metricsreg.Register(reg, m.cacheHits); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) hooks(output func(runtime.OutputEvent), compiled func(runtime.CompileEvent)) runtime.Hooks {
	return runtime.Hooks{
		Compiled: func(e runtime.CompileEvent) {
			if e.Err != nil {
				m.failures.WithLabelValues(e.Plugin, string(runtime.ReasonInvalidModule)).Inc()
			} else {
				m.compile.WithLabelValues(e.Plugin, string(e.Layer)).Observe(e.Duration.Seconds())
			}
			compiled(e)
		},
		CacheHit: func(l runtime.CacheLayer) { m.cacheHits.WithLabelValues(string(l)).Inc() },
		Called: func(e runtime.CallEvent) {
			m.calls.WithLabelValues(e.Plugin, e.Export).Observe(e.Duration.Seconds())
			if e.Err != nil {
				m.failures.WithLabelValues(e.Plugin, string(e.Err.Reason)).Inc()
			}
		},
		Output: output,
	}
}
