package rollout_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/controllers/rollout"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
)

// The tests here drive the rollout state machine alone against a real API server: the test writes the drift
// facts the OSC reconciler records (OSC annotations, the Ready condition) and plays machine-controller
// (a template change gets the next revision, the rollout completes when the test says). host/app
// TestDriftAndRollout runs the same with the OSC reconciler; host/e2e/machinecontroller with the real
// machine-controller.

const (
	mgmtNS   = "osm"         // -namespace: OSCs and profiles
	workerNS = "kube-system" // MachineDeployments
	profile  = "osp-fleet"
	wait     = time.Minute // bounds a wait for the controller, never a performance expectation
)

// fixture is a control plane with the rollout controller running.
type fixture struct {
	t   *testing.T
	ctx context.Context
	c   client.Client
	reg *prometheus.Registry

	mu         sync.Mutex
	maxRolling int
}

func start(t *testing.T, maxConcurrent int, profilePolicy string) *fixture {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{t: t, ctx: ctx, c: env.Client, reg: prometheus.NewRegistry()}
	if err := f.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mgmtNS}}); err != nil {
		t.Fatal(err)
	}
	p := &osmv1alpha1.OperatingSystemProfile{
		ObjectMeta: metav1.ObjectMeta{Name: profile, Namespace: mgmtNS, Annotations: map[string]string{}},
		Spec: osmv1alpha1.OperatingSystemProfileSpec{OSName: "ubuntu", OSVersion: "24.04", Version: "v1.0.0",
			SupportedCloudProviders: []osmv1alpha1.CloudProviderSpec{{Name: "aws"}}},
	}
	if profilePolicy != "" {
		p.Annotations[rollout.AnnotationPolicy] = profilePolicy
	}
	if err := f.c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: testenv.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	// The profile index the OSC reconciler registers in the controller.
	if err := mgr.GetFieldIndexer().IndexField(ctx, &clusterv1alpha1.MachineDeployment{}, osc.IndexProfile, func(o client.Object) []string {
		md := o.(*clusterv1alpha1.MachineDeployment)
		if md.Annotations[clusterv1alpha1.AnnotationOSP] == "" {
			return nil
		}
		ns, name := render.ProfileKey(md, mgmtNS)
		return []string{ns + "/" + name}
	}); err != nil {
		t.Fatal(err)
	}
	r := &rollout.Reconciler{Worker: mgr.GetClient(), Mgmt: mgr.GetClient(), MgmtAPIReader: mgr.GetAPIReader(), Namespace: mgmtNS,
		MaxConcurrent: maxConcurrent, Recorder: mgr.GetEventRecorderFor("operating-system-manager")} //nolint:staticcheck // as host/app
	if err := r.SetupWithManager(mgr, mgr, f.reg); err != nil {
		t.Fatal(err)
	}
	if err := f.countRolling(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return f
}

// countRolling counts, at every change of a MachineDeployment the manager's cache sees, the MachineDeployments
// rolling at once: OSM's rollout annotation in the template and machine-controller's status not complete. The
// count follows each MachineDeployment's own events in order, so no state in between is missed.
func (f *fixture) countRolling(ctx context.Context, mgr ctrl.Manager) error {
	inf, err := mgr.GetCache().GetInformer(ctx, &clusterv1alpha1.MachineDeployment{})
	if err != nil {
		return err
	}
	rolling := map[string]bool{}
	set := func(obj any, deleted bool) {
		md, ok := obj.(*clusterv1alpha1.MachineDeployment)
		if !ok || md.Namespace != workerNS {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		rolling[md.Name] = !deleted && md.Spec.Template.Annotations[rollout.AnnotationRollout] != "" && !rollout.Finished(md)
		n := 0
		for _, r := range rolling {
			if r {
				n++
			}
		}
		f.maxRolling = max(f.maxRolling, n)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj, false) },
		UpdateFunc: func(_, obj any) { set(obj, false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			set(obj, true)
		},
	})
	return err
}

func (f *fixture) rollingAtMost() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxRolling
}

// machineDeployment creates a MachineDeployment at revision 1, complete, with its OSC rendered in sync.
func (f *fixture) machineDeployment(name string, annotations map[string]string) {
	f.t.Helper()
	pc := []byte(`{"cloudProvider":"aws","cloudProviderSpec":{},"operatingSystem":"ubuntu","operatingSystemSpec":{}}`)
	md := &clusterv1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: workerNS,
			Annotations: map[string]string{clusterv1alpha1.AnnotationOSP: profile, clusterv1alpha1.AnnotationRevision: "1"}},
		Spec: clusterv1alpha1.MachineDeploymentSpec{Replicas: ptr.To[int32](2), Template: clusterv1alpha1.MachineTemplateSpec{Spec: clusterv1alpha1.MachineSpec{
			ProviderSpec: clusterv1alpha1.ProviderSpec{Value: &runtime.RawExtension{Raw: pc}},
			Versions:     clusterv1alpha1.MachineVersionInfo{Kubelet: "1.33.2"},
		}}},
	}
	for k, v := range annotations {
		md.Annotations[k] = v
	}
	if err := f.c.Create(f.ctx, md); err != nil {
		f.t.Fatal(err)
	}
	md.Status = clusterv1alpha1.MachineDeploymentStatus{ObservedGeneration: md.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	if err := f.c.Status().Update(f.ctx, md); err != nil {
		f.t.Fatal(err)
	}
	cfg := &osmv1alpha1.OperatingSystemConfig{
		ObjectMeta: metav1.ObjectMeta{Name: render.OSCName(md), Namespace: mgmtNS, Annotations: credentials.Annotations(md)},
		Spec:       osmv1alpha1.OperatingSystemConfigSpec{OSName: "ubuntu", OSVersion: "24.04", CloudProvider: osmv1alpha1.CloudProviderSpec{Name: "aws"}},
		// Written with the OSC, as the OSC reconciler does (OSCs have no status subresource).
		Status: osmv1alpha1.OperatingSystemConfigStatus{Conditions: []metav1.Condition{{Type: osmv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "Rendered", LastTransitionTime: metav1.Now()}}},
	}
	cfg.Annotations[osc.AnnotationRenderHash] = "inputs-1"
	cfg.Annotations[osc.AnnotationRevision] = "1"
	cfg.Annotations[osc.AnnotationConfigDigest] = "config-" + name + "-1"
	if err := f.c.Create(f.ctx, cfg); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) md(name string) *clusterv1alpha1.MachineDeployment {
	f.t.Helper()
	md := &clusterv1alpha1.MachineDeployment{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: workerNS, Name: name}, md); err != nil {
		f.t.Fatal(err)
	}
	return md
}

func (f *fixture) osc(name string) *osmv1alpha1.OperatingSystemConfig {
	f.t.Helper()
	o := &osmv1alpha1.OperatingSystemConfig{}
	key := client.ObjectKey{Namespace: mgmtNS, Name: render.OSCName(&clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: workerNS, Name: name}})}
	if err := f.c.Get(f.ctx, key, o); err != nil {
		f.t.Fatal(err)
	}
	return o
}

// updateOSC changes the MachineDeployment's OSC as the OSC reconciler would, retrying on conflicts.
func (f *fixture) updateOSC(name string, change func(*osmv1alpha1.OperatingSystemConfig)) {
	f.t.Helper()
	f.eventually("updating the OSC of "+name, func() error {
		o := f.osc(name)
		change(o)
		return f.c.Update(f.ctx, o)
	})
}

// drift records on the OSC what the OSC reconciler does when a re-render for the same revision differs from
// the revision's first: a new configuration, drifted since since.
func (f *fixture) drift(name string, since time.Time) {
	f.t.Helper()
	f.updateOSC(name, func(o *osmv1alpha1.OperatingSystemConfig) {
		o.Annotations[osc.AnnotationRenderHash] = "inputs-2"
		o.Annotations[osc.AnnotationConfigDigest] = "config-" + name + "-2"
		o.Annotations[osc.AnnotationDriftedSince] = since.UTC().Format(time.RFC3339)
	})
}

// setMDAnnotation sets (or, with value "", removes) an annotation of a MachineDeployment.
func (f *fixture) setMDAnnotation(name, key, value string) {
	f.t.Helper()
	f.eventually("annotating "+name, func() error {
		md := f.md(name)
		patch := client.MergeFromWithOptions(md.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if value == "" {
			delete(md.Annotations, key)
		} else {
			md.Annotations[key] = value
		}
		return f.c.Patch(f.ctx, md, patch)
	})
}

// accept plays machine-controller taking a template change: the next revision, one machine of two updated.
// The OSC reconciler then renders the new revision: its first render, not drifted.
func (f *fixture) accept(name string) {
	f.t.Helper()
	var revision string
	f.eventually(name+": machine-controller takes the template change", func() error {
		md := f.md(name)
		if md.Status.ObservedGeneration >= md.Generation {
			return fmt.Errorf("template unchanged (generation %d observed)", md.Generation)
		}
		rev, _ := strconv.Atoi(md.Annotations[clusterv1alpha1.AnnotationRevision])
		revision = strconv.Itoa(rev + 1)
		patch := client.MergeFromWithOptions(md.DeepCopy(), client.MergeFromWithOptimisticLock{})
		md.Annotations[clusterv1alpha1.AnnotationRevision] = revision
		if err := f.c.Patch(f.ctx, md, patch); err != nil {
			return err
		}
		md.Status = clusterv1alpha1.MachineDeploymentStatus{ObservedGeneration: md.Generation, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2}
		return f.c.Status().Update(f.ctx, md)
	})
	f.updateOSC(name, func(o *osmv1alpha1.OperatingSystemConfig) {
		o.Annotations[osc.AnnotationRevision] = revision
		delete(o.Annotations, osc.AnnotationDriftedSince)
	})
}

// complete plays machine-controller finishing the rollout: every replica updated and available.
func (f *fixture) complete(name string) {
	f.t.Helper()
	f.eventually(name+": machine-controller completes the rollout", func() error {
		md := f.md(name)
		md.Status = clusterv1alpha1.MachineDeploymentStatus{ObservedGeneration: md.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
		return f.c.Status().Update(f.ctx, md)
	})
}

// rollingOut waits for the OSC's RollingOut condition to have reason (status True only for
// RolloutInProgress) and returns its message.
func (f *fixture) rollingOut(name, reason string) string {
	f.t.Helper()
	want := metav1.ConditionFalse
	if reason == osmv1alpha1.ReasonRolloutInProgress {
		want = metav1.ConditionTrue
	}
	var msg string
	f.eventually(fmt.Sprintf("%s: RollingOut %s/%s", name, want, reason), func() error {
		c := meta.FindStatusCondition(f.osc(name).Status.Conditions, osmv1alpha1.ConditionRollingOut)
		if c == nil || c.Reason != reason || c.Status != want {
			return fmt.Errorf("RollingOut: %+v", c)
		}
		msg = c.Message
		return nil
	})
	return msg
}

// started waits until OSM changed the MachineDeployment's template for the configuration of revision.
func (f *fixture) started(name, revision string) {
	f.t.Helper()
	want := "config-" + name + "-2@" + revision
	f.eventually(name+": rollout started", func() error {
		if got := f.md(name).Spec.Template.Annotations[rollout.AnnotationRollout]; got != want {
			return fmt.Errorf("template annotation %s=%q, want %q", rollout.AnnotationRollout, got, want)
		}
		return nil
	})
	f.rollingOut(name, osmv1alpha1.ReasonRolloutInProgress)
	f.event(name, corev1.EventTypeNormal, "RolloutStarted")
}

// notStarted checks that OSM has not changed the MachineDeployment's template.
func (f *fixture) notStarted(name string) {
	f.t.Helper()
	md := f.md(name)
	if v, ok := md.Spec.Template.Annotations[rollout.AnnotationRollout]; ok || md.Status.ObservedGeneration < md.Generation {
		f.t.Errorf("%s was rolled: template annotation %q, generation %d", name, v, md.Generation)
	}
}

// event waits for an event of type and reason on the MachineDeployment.
func (f *fixture) event(name, typ, reason string) string {
	f.t.Helper()
	var msg string
	f.eventually(fmt.Sprintf("%s event %s on %s", typ, reason, name), func() error {
		events := &corev1.EventList{}
		if err := f.c.List(f.ctx, events, client.InNamespace(workerNS)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Type == typ && e.Reason == reason {
				msg = e.Message
				return nil
			}
		}
		return fmt.Errorf("none")
	})
	return msg
}

// gauge waits for the gauge to read want.
func (f *fixture) gauge(name string, want float64) {
	f.t.Helper()
	f.eventually(fmt.Sprintf("%s = %v", name, want), func() error {
		families, err := f.reg.Gather()
		if err != nil {
			return err
		}
		for _, fam := range families {
			if fam.GetName() == name {
				if got := fam.Metric[0].GetGauge().GetValue(); got != want {
					return fmt.Errorf("%v", got)
				}
				return nil
			}
		}
		return fmt.Errorf("no such gauge")
	})
}

// absenceWindow gives the controller a second to act where the test then asserts that it did not. It orders
// nothing: a window too short for the controller only lets a bug pass, and never fails a correct controller.
func (f *fixture) absenceWindow() { time.Sleep(time.Second) }

func (f *fixture) eventually(what string, check func() error) {
	f.t.Helper()
	testenv.Eventually(f.t, wait, what, check)
}

// TestRolloutQueue: with a budget of one, drifted MachineDeployments under the rollout policy (their own or
// their profile's) queue behind the one rolling and start one at a time, longest drifted first, each when the
// one before finished or was deleted; a queued one whose drift resolves never rolls; a manual one (overriding
// its profile's policy) only reports.
func TestRolloutQueue(t *testing.T) {
	f := start(t, 1, rollout.PolicyRollout)
	f.machineDeployment("manual", map[string]string{rollout.AnnotationPolicy: rollout.PolicyManual})
	for _, name := range []string{"holder", "first", "second", "third", "flip"} {
		f.machineDeployment(name, nil) // the profile's policy: rollout
	}
	f.absenceWindow()
	for _, name := range []string{"manual", "holder", "first", "second", "third", "flip"} {
		f.notStarted(name) // in sync: nothing to do
	}

	// Drift detected on the first: it rolls at once.
	now := time.Now()
	f.drift("holder", now.Add(-5*time.Hour))
	f.started("holder", "1")

	// Drift on the others, in no particular order: they queue.
	f.drift("second", now.Add(-2*time.Hour))
	f.drift("manual", now.Add(-4*time.Hour)) // the longest drifted, but manual
	f.drift("third", now.Add(-1*time.Hour))
	f.drift("flip", now.Add(-30*time.Minute))
	f.drift("first", now.Add(-3*time.Hour))
	for _, name := range []string{"second", "third", "flip", "first"} {
		msg := f.rollingOut(name, osmv1alpha1.ReasonRolloutQueued)
		if !strings.Contains(msg, "1 of -rollout-max-concurrent=1") {
			t.Errorf("%s: RollingOut message %q", name, msg)
		}
	}
	f.gauge("osm_machinedeployments_rolling", 1)
	f.gauge("osm_machinedeployments_rollout_queued", 4)
	f.gauge("osm_machinedeployments_drifted", 6)
	if c := meta.FindStatusCondition(f.osc("manual").Status.Conditions, osmv1alpha1.ConditionRollingOut); c != nil {
		t.Errorf("manual: RollingOut %+v, want none under the manual policy", c)
	}

	// A queued one's drift resolves (a change flipped back): it leaves the queue.
	f.updateOSC("flip", func(o *osmv1alpha1.OperatingSystemConfig) { delete(o.Annotations, osc.AnnotationDriftedSince) })
	f.gauge("osm_machinedeployments_rollout_queued", 3)

	// Rolling (machine-controller took the template change), then done: the longest drifted starts.
	f.accept("holder")
	f.rollingOut("holder", osmv1alpha1.ReasonRolloutInProgress)
	f.absenceWindow()
	for _, name := range []string{"first", "second", "third"} {
		f.notStarted(name)
	}
	f.complete("holder")
	f.rollingOut("holder", osmv1alpha1.ReasonRolloutFinished)
	f.event("holder", corev1.EventTypeNormal, osmv1alpha1.ReasonRolloutFinished)
	f.started("first", "1")
	f.notStarted("second")
	f.notStarted("third")
	f.accept("first")
	f.complete("first")
	f.rollingOut("first", osmv1alpha1.ReasonRolloutFinished)
	f.started("second", "1")
	f.notStarted("third")

	// A MachineDeployment deleted while rolling frees its slot.
	f.accept("second")
	if err := f.c.Delete(f.ctx, f.md("second")); err != nil {
		t.Fatal(err)
	}
	f.started("third", "1")
	f.accept("third")
	f.complete("third")
	f.rollingOut("third", osmv1alpha1.ReasonRolloutFinished)
	f.gauge("osm_machinedeployments_rolling", 0)
	f.gauge("osm_machinedeployments_rollout_queued", 0)

	f.absenceWindow()
	f.notStarted("manual")
	f.notStarted("flip")
	if n := f.rollingAtMost(); n != 1 {
		t.Errorf("at most %d MachineDeployments rolling at once, want 1", n)
	}
}

// TestRolloutBudgetOfTwo: two roll at once, the third starts when one of them finishes.
func TestRolloutBudgetOfTwo(t *testing.T) {
	f := start(t, 2, "")
	policy := map[string]string{rollout.AnnotationPolicy: rollout.PolicyRollout}
	for _, name := range []string{"a", "b", "c"} {
		f.machineDeployment(name, policy)
	}
	now := time.Now()
	for i, name := range []string{"a", "b", "c"} {
		f.drift(name, now.Add(-time.Duration(3-i)*time.Hour))
	}
	// Which two start depends on the order in which their drift, written milliseconds apart, reaches the
	// controller: a MachineDeployment it has not yet seen drift is not in the queue. The order among queued
	// ones is TestRolloutQueue's; here two start and the third waits for one of them.
	var first, second, third string
	f.eventually("two rollouts started", func() error {
		var rolling, waiting []string
		for _, name := range []string{"a", "b", "c"} {
			if f.md(name).Spec.Template.Annotations[rollout.AnnotationRollout] != "" {
				rolling = append(rolling, name)
			} else {
				waiting = append(waiting, name)
			}
		}
		if len(rolling) != 2 {
			return fmt.Errorf("rolling: %v", rolling)
		}
		first, second, third = rolling[0], rolling[1], waiting[0]
		return nil
	})
	f.started(first, "1")
	f.started(second, "1")
	if msg := f.rollingOut(third, osmv1alpha1.ReasonRolloutQueued); !strings.Contains(msg, "2 of -rollout-max-concurrent=2") {
		t.Errorf("%s: RollingOut message %q", third, msg)
	}
	f.accept(first)
	f.accept(second)
	f.complete(second)
	f.rollingOut(second, osmv1alpha1.ReasonRolloutFinished)
	f.started(third, "1")
	f.accept(third)
	f.complete(first)
	f.complete(third)
	f.rollingOut(first, osmv1alpha1.ReasonRolloutFinished)
	f.rollingOut(third, osmv1alpha1.ReasonRolloutFinished)
	// Two at once is what the queued message and the starts above show; the sampler, every 50 ms, holds
	// the budget: never more than two.
	if n := f.rollingAtMost(); n > 2 {
		t.Errorf("%d MachineDeployments rolling at once, more than the budget of 2", n)
	}
}

// TestRolloutWindowRenderAndPolicy: a closed window holds a rollout until it opens, and closing it does not
// stop one under way; a render that failed holds a rollout until a render succeeds; a policy that does not
// parse rolls nothing and says so; a policy removed while queued stops the rollout.
func TestRolloutWindowRenderAndPolicy(t *testing.T) {
	f := start(t, 1, "")
	policy := map[string]string{rollout.AnnotationPolicy: rollout.PolicyRollout}
	now := time.Now().UTC()
	closed := now.Add(48 * time.Hour).Weekday().String()[:3] + " 00:00-00:01 UTC"
	open := fmt.Sprintf("%s-%s UTC", now.Add(-time.Hour).Format("15:04"), now.Add(2*time.Hour).Format("15:04"))

	t.Run("window closed, then open", func(t *testing.T) {
		f.t = t
		f.machineDeployment("windowed", map[string]string{rollout.AnnotationPolicy: rollout.PolicyRollout, rollout.AnnotationWindow: closed})
		f.drift("windowed", now.Add(-time.Hour))
		msg := f.rollingOut("windowed", osmv1alpha1.ReasonRolloutWindowClosed)
		next, _ := rollout.ParseWindow(closed)
		if want := next.NextOpen(time.Now()).UTC().Format(time.RFC3339); !strings.Contains(msg, want) {
			t.Errorf("RolloutWindowClosed message %q does not say when the window opens (%s)", msg, want)
		}
		f.notStarted("windowed")
		f.setMDAnnotation("windowed", rollout.AnnotationWindow, open)
		f.started("windowed", "1")
		f.accept("windowed")
		f.setMDAnnotation("windowed", rollout.AnnotationWindow, closed) // closing it does not stop it
		f.absenceWindow()
		f.rollingOut("windowed", osmv1alpha1.ReasonRolloutInProgress)
		f.complete("windowed")
		f.rollingOut("windowed", osmv1alpha1.ReasonRolloutFinished)
	})

	t.Run("render failed, then rendered", func(t *testing.T) {
		f.t = t
		f.machineDeployment("broken", policy)
		f.updateOSC("broken", func(o *osmv1alpha1.OperatingSystemConfig) {
			meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: osmv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: osmv1alpha1.ReasonTemplateError, Message: "template: bad"})
		})
		f.drift("broken", now.Add(-time.Hour))
		f.rollingOut("broken", osmv1alpha1.ReasonRolloutRenderNotReady)
		f.absenceWindow()
		f.notStarted("broken")
		f.updateOSC("broken", func(o *osmv1alpha1.OperatingSystemConfig) {
			meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: osmv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Rendered"})
		})
		f.started("broken", "1")
		f.accept("broken")
		f.complete("broken")
		f.rollingOut("broken", osmv1alpha1.ReasonRolloutFinished)
	})

	t.Run("invalid policy", func(t *testing.T) {
		f.t = t
		f.machineDeployment("invalid", map[string]string{rollout.AnnotationPolicy: "sometimes"})
		f.drift("invalid", now.Add(-time.Hour))
		if msg := f.event("invalid", corev1.EventTypeWarning, "RolloutPolicyInvalid"); !strings.Contains(msg, `"sometimes"`) {
			t.Errorf("RolloutPolicyInvalid message %q does not name the policy", msg)
		}
		f.machineDeployment("badwindow", map[string]string{rollout.AnnotationPolicy: rollout.PolicyRollout, rollout.AnnotationWindow: "weekends"})
		f.drift("badwindow", now.Add(-time.Hour))
		f.event("badwindow", corev1.EventTypeWarning, "RolloutPolicyInvalid")
		f.absenceWindow()
		f.notStarted("invalid")
		f.notStarted("badwindow")
	})

	t.Run("policy removed while queued", func(t *testing.T) {
		f.t = t
		f.machineDeployment("holder", policy)
		f.machineDeployment("waiting", policy)
		f.drift("holder", now.Add(-2*time.Hour))
		f.drift("waiting", now.Add(-time.Hour))
		f.started("holder", "1")
		f.rollingOut("waiting", osmv1alpha1.ReasonRolloutQueued)
		f.setMDAnnotation("waiting", rollout.AnnotationPolicy, "")
		f.rollingOut("waiting", osmv1alpha1.ReasonRolloutManual)
		f.accept("holder")
		f.complete("holder")
		f.rollingOut("holder", osmv1alpha1.ReasonRolloutFinished)
		f.absenceWindow()
		f.notStarted("waiting")
	})
}
