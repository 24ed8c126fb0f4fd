package pluginhost

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/internal/metricsreg"
)

type metrics struct {
	starts      *prometheus.CounterVec
	deaths      *prometheus.CounterVec
	retries     prometheus.Counter
	quarantines prometheus.Counter
	compileCPU  prometheus.Counter
	loaded      prometheus.Gauge
	unloads     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osm_plugin_host_starts_total",
			Help: "Plugin host processes started (role builtin: the built-in modules' host; tenant: a host of one tenant's module; compile: a process that compiles one tenant's module and runs none of its code)."}, []string{"role"}),
		deaths: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osm_plugin_host_deaths_total",
			Help: "Plugin host processes that ended, by reason (Timeout and OutOfMemory: killed by the supervisor; HostCrashed; CacheTampered: a host found its compiled code changed; Closed: stopped, or a compile process that succeeded; InvalidModule: a compile process that refused its module)."}, []string{"role", "reason"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "osm_plugin_host_retries_total",
			Help: "Plugin operations run again because their host stopped or was killed for another operation under them."}),
		quarantines: prometheus.NewCounter(prometheus.CounterOpts{Name: "osm_plugin_quarantines_total",
			Help: "Plugin modules quarantined because their host died repeatedly."}),
		compileCPU: prometheus.NewCounter(prometheus.CounterOpts{Name: "osm_plugin_compile_cpu_seconds_total",
			Help: "CPU time of the processes that compiled tenants' modules (role compile), which run no guest code."}),
		loaded: prometheus.NewGauge(prometheus.GaugeOpts{Name: "osm_plugin_loaded_modules",
			Help: "Plugin modules loaded in the running plugin hosts; at most one per tenant's host (-plugin-max-loaded hosts) plus the built-ins."}),
		unloads: prometheus.NewCounter(prometheus.CounterOpts{Name: "osm_plugin_unloads_total",
			Help: "Plugin modules unloaded: their host stopped (idle, or evicted past -plugin-max-loaded), the built-in host forgot an idle one, or an admission review discarded one."}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.starts, err = metricsreg.Register(reg, m.starts); err != nil {
		return nil, err
	}
	if m.deaths, err = metricsreg.Register(reg, m.deaths); err != nil {
		return nil, err
	}
	if m.retries, err = metricsreg.Register(reg, m.retries); err != nil {
		return nil, err
	}
	if m.quarantines, err = metricsreg.Register(reg, m.quarantines); err != nil {
		return nil, err
	}
	if m.compileCPU, err = metricsreg.Register(reg, m.compileCPU); err != nil {
		return nil, err
	}
	if m.loaded, err = metricsreg.Register(reg, m.loaded); err != nil {
		return nil, err
	}
	if m.unloads, err = metricsreg.Register(reg, m.unloads); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) started(role string)      { m.starts.WithLabelValues(role).Inc() }
func (m *metrics) died(role, reason string) { m.deaths.WithLabelValues(role, reason).Inc() }
