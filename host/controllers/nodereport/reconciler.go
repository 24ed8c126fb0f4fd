package nodereport

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
)

// ReasonMachineBootstrapFailed is the reason of the Warning event on a MachineDeployment whose machine reported
// a failed bootstrap.
const ReasonMachineBootstrapFailed = "MachineBootstrapFailed"

// Reconciler keeps one MachineDeployment's report object and folds it into its OSC.
type Reconciler struct {
	// Worker reads MachineDeployments, Machines and reports, and writes reports (-worker-cluster-kubeconfig).
	Worker client.Client
	// Mgmt patches OSC status (-kubeconfig).
	Mgmt client.Client
	// MgmtAPIReader reads OSCs past the management cache, which holds their metadata only.
	MgmtAPIReader client.Reader
	// Issuer brings a Role of an OSM version before reports in line when the report is created.
	Issuer *credentials.Issuer
	// Namespace is the controller's namespace, where the OSCs are.
	Namespace string
	// Recorder records events on MachineDeployments in the worker cluster.
	Recorder record.EventRecorder

	metrics *metrics
	// warned holds, by MachineDeployment, the failures already announced by an event (failureKey).
	warned sync.Map
}

// Reconcile creates the MachineDeployment's report object, prunes the entries of machines that are gone,
// writes the OSC's status.nodes, and announces new failures.
func (r *Reconciler) reconcile(ctx context.Context, req client.ObjectKey) error {
	md := &clusterv1alpha1.MachineDeployment{}
	if err := r.Worker.Get(ctx, req, md); err != nil {
		if apierrors.IsNotFound(err) {
			r.metrics.forget(req.Namespace, req.Name)
			r.warned.Delete(req)
		}
		return client.IgnoreNotFound(err)
	}
	if !md.DeletionTimestamp.IsZero() || md.Annotations[clusterv1alpha1.AnnotationOSP] == "" {
		return nil // the OSC controller's cleanup (credentials.Issuer.Revoke) deletes the report
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("machinedeployment", klog.KObj(md))
	cfg := osc.OSCMeta()
	if err := r.Mgmt.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: render.OSCName(md)}, cfg); err != nil {
		return client.IgnoreNotFound(err) // not rendered yet: the OSC's creation brings it back
	}
	if !credentials.Marked(md, cfg) {
		return nil
	}
	report, err := r.ensureReport(ctx, md)
	if err != nil || report == nil {
		return err
	}
	if err := r.prune(ctx, md, report); err != nil {
		log.Error(err, "pruning the bootstrap reports of deleted machines")
	}
	sum := Summarize(report.Status.Machines)
	r.metrics.observe(md.Namespace, md.Name, sum)
	r.announce(md, report.Status.Machines)
	if len(report.Status.Machines) == 0 && cfg.Generation == oscCreated {
		// No status write since the OSC was created, so it has no summary, and none is due: a new
		// MachineDeployment's report costs no read of its OSC (two per MachineDeployment before).
		return nil
	}
	live := &osmv1alpha1.OperatingSystemConfig{}
	if err := r.MgmtAPIReader.Get(ctx, client.ObjectKeyFromObject(cfg), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if live.UID != cfg.UID || reflect.DeepEqual(live.Status.Nodes, sum) || live.Status.Nodes == nil && len(report.Status.Machines) == 0 {
		return nil // replaced (its creation brings us back), or nothing new
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"nodes": sum}})
	if err != nil {
		return err
	}
	if err := r.Mgmt.Patch(ctx, live, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("writing the bootstrap summary into OperatingSystemConfig %s: %w", klog.KObj(live), err)
	}
	return nil
}

// oscCreated is the generation of an OSC no status write changed since its creation (an OSC has no status
// subresource, so every status write bumps it; osc's specGeneration): only this controller writes
// status.nodes, so such an OSC has none.
const oscCreated = 1

// ensureReport returns md's report object, creating it (and bringing an existing reader Role's rules in line,
// so the node credential may write it) when it does not exist. nil when one of that name belongs to another
// MachineDeployment: it is neither used nor overwritten.
func (r *Reconciler) ensureReport(ctx context.Context, md *clusterv1alpha1.MachineDeployment) (*osmv1alpha1.OperatingSystemNodeReport, error) {
	key := client.ObjectKey{Namespace: r.Issuer.Namespace, Name: render.ProvisioningSecretName(md)}
	report := &osmv1alpha1.OperatingSystemNodeReport{}
	err := r.Worker.Get(ctx, key, report)
	if err == nil {
		if !credentials.Marked(md, report) {
			return nil, nil
		}
		return report, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	report = &osmv1alpha1.OperatingSystemNodeReport{}
	report.Namespace, report.Name = key.Namespace, key.Name
	credentials.Mark(md, report)
	if err := r.Worker.Create(ctx, report); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating OperatingSystemNodeReport %s: %w", key, err)
	}
	if err := r.Issuer.AlignReaderRole(ctx, md); err != nil {
		return nil, err
	}
	return report, nil
}

// prune removes the entries of machines that are not md's (any more). Without machine-controller's kinds in
// the cluster nothing is pruned.
func (r *Reconciler) prune(ctx context.Context, md *clusterv1alpha1.MachineDeployment, report *osmv1alpha1.OperatingSystemNodeReport) error {
	if len(report.Status.Machines) == 0 {
		return nil
	}
	names, err := machineNames(ctx, r.Worker, md)
	if meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return err
	}
	gone := map[string]any{}
	for name := range report.Status.Machines {
		if !names[name] {
			gone[name] = nil
		}
	}
	if len(gone) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"machines": gone}})
	if err != nil {
		return err
	}
	if err := r.Worker.Status().Patch(ctx, report, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	for name := range gone {
		delete(report.Status.Machines, name)
	}
	return nil
}

// announce records a Warning event on md for each failure it has not announced yet: once per machine, step
// and exit code, however often the node retries and the reconciler resyncs.
func (r *Reconciler) announce(md *clusterv1alpha1.MachineDeployment, machines map[string]osmv1alpha1.MachineBootstrapReport) {
	key := client.ObjectKeyFromObject(md)
	v, _ := r.warned.LoadOrStore(key, &sync.Map{})
	warned := v.(*sync.Map)
	for name, m := range machines {
		if m.Phase != osmv1alpha1.PhaseFailed {
			if m.Phase == osmv1alpha1.PhaseNodeRegistered {
				forgetMachine(warned, name)
			}
			continue
		}
		fk := failureKey(name, m)
		if _, seen := warned.LoadOrStore(fk, true); seen {
			continue
		}
		r.metrics.failures.WithLabelValues(m.Step).Inc()
		if r.Recorder != nil {
			r.Recorder.Event(md, corev1.EventTypeWarning, ReasonMachineBootstrapFailed, failureMessage(name, m))
		}
	}
}

func forgetMachine(warned *sync.Map, name string) {
	warned.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), name+"/") {
			warned.Delete(k)
		}
		return true
	})
}

// failureMessage names the machine, the step, the exit code and the last line of its (node-redacted) output.
func failureMessage(name string, m osmv1alpha1.MachineBootstrapReport) string {
	msg := fmt.Sprintf("machine %s failed its bootstrap at step %s", name, m.Step)
	if m.ExitCode != nil {
		msg += fmt.Sprintf(" (exit code %d)", *m.ExitCode)
	}
	if n := len(m.LogTail); n > 0 {
		msg += ": " + m.LogTail[n-1]
	}
	return msg + "; see the OperatingSystemConfig's status.nodes.failing"
}

// NewMetrics registers the controller's metrics with reg.
func (r *Reconciler) NewMetrics(reg prometheus.Registerer) { r.metrics = newMetrics(reg) }
