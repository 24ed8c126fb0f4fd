package osc

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// CountSkipped gives r its metrics and returns how many of its reconciles found everything current, neither
// rendering nor writing (osm_render_skipped_total).
func CountSkipped(r *Reconciler) func() float64 {
	r.metrics = newMetrics(prometheus.NewRegistry())
	return func() float64 { return testutil.ToFloat64(r.metrics.skipped) }
}
