package app

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/osmhq/osm/host/controllers/nodereport"
	"github.com/osmhq/osm/host/controllers/osc"
)

// setupNodeReports starts the node report controller unless reports are off or the worker cluster does not
// serve OperatingSystemNodeReports (then the reader Roles grant no report either; see osc's Issuer).
func setupNodeReports(o Options, mgr ctrl.Manager, worker cluster.Cluster, oscs *osc.Reconciler) error {
	if o.NoNodeReports || !nodereport.Served(worker) {
		o.Logger.Info("node bootstrap reports are off", "flag", o.NoNodeReports)
		return nil
	}
	r := &nodereport.Reconciler{Worker: worker.GetClient(), Mgmt: mgr.GetClient(), MgmtAPIReader: mgr.GetAPIReader(),
		Issuer: oscs.Issuer, Namespace: o.Settings.Namespace, Recorder: oscs.Recorder}
	return r.SetupWithManager(mgr, worker, metrics.Registry)
}
