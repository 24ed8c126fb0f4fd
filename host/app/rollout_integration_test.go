package app_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/controllers/rollout"
	"github.com/osmhq/osm/host/testenv"
)

// TestDriftAndRollout drives the drift and rollout state machine against a real API server, with the test
// standing in for machine-controller: a template change gets a new revision, and the new revision's machines
// become updated and available a moment later.
func TestDriftAndRollout(t *testing.T) {
	// Not parallel: gauge reads metrics.Registry, whose gauges the controller started last replaces.
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	startOSM(t, env, nil, app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true, WorkerCount: 4, RolloutMaxConcurrent: 1})

	profile := func(name, version, content string) *osmv1alpha1.OperatingSystemProfile {
		p := testOSP(name, version)
		p.Spec.ProvisioningConfig.Files = append(p.Spec.ProvisioningConfig.Files, osmv1alpha1.File{Path: "/etc/osm-drift",
			Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: content}}})
		return p
	}
	bump := func(name, version, content string) {
		t.Helper()
		eventually(t, wait, "bumping "+name+" to "+version, func() error {
			p := &osmv1alpha1.OperatingSystemProfile{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: name}, p); err != nil {
				return err
			}
			p.Spec = profile(name, version, content).Spec
			return c.Update(ctx, p)
		})
	}
	// closed is a maintenance window that is not open now: two days ahead.
	day := time.Now().UTC().Add(48 * time.Hour).Weekday().String()[:3]
	closed := day + " 00:00-00:01 UTC"

	for _, p := range []*osmv1alpha1.OperatingSystemProfile{profile("osp-fleet", "v1.0.0", "one"), profile("osp-broken", "v1.0.0", "one"), profile("osp-flip", "v1.0.0", "one")} {
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	mds := map[string]*clusterv1alpha1.MachineDeployment{}
	for _, m := range []struct{ name, osp, policy, window string }{
		{"manual", "osp-fleet", "", ""},
		{"roll-a", "osp-fleet", "rollout", ""},
		{"roll-b", "osp-fleet", "rollout", ""},
		{"roll-c", "osp-fleet", "rollout", ""},
		{"broken", "osp-broken", "rollout", closed},
		{"flip", "osp-flip", "rollout", closed},
	} {
		md := newMD(t, m.name, "testos", "aws", m.osp)
		if m.policy != "" {
			md.Annotations[rollout.AnnotationPolicy] = m.policy
		}
		if m.window != "" {
			md.Annotations[rollout.AnnotationWindow] = m.window
		}
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "machine-controller's status on "+m.name, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
				return err
			}
			md.Status = clusterv1alpha1.MachineDeploymentStatus{ObservedGeneration: md.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
			return c.Status().Update(ctx, md)
		})
		mds[m.name] = md
	}
	getMD := func(name string) *clusterv1alpha1.MachineDeployment {
		md := &clusterv1alpha1.MachineDeployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: name}, md); err != nil {
			t.Fatal(err)
		}
		return md
	}
	getOSC := func(name string) (*osmv1alpha1.OperatingSystemConfig, error) {
		o := &osmv1alpha1.OperatingSystemConfig{}
		return o, c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: name + ".kube-system-config"}, o)
	}
	// waitCondition waits for the OSC of md to be at revision with condition cond in status and reason.
	waitCondition := func(md, revision, cond string, status metav1.ConditionStatus, reason string) *osmv1alpha1.OperatingSystemConfig {
		t.Helper()
		var o *osmv1alpha1.OperatingSystemConfig
		eventually(t, wait, fmt.Sprintf("%s: %s=%s/%s at revision %s", md, cond, status, reason, revision), func() (err error) {
			if o, err = getOSC(md); err != nil {
				return err
			}
			c := meta.FindStatusCondition(o.Status.Conditions, cond)
			if o.Status.MachineDeploymentRevision != revision || c == nil || c.Status != status || c.Reason != reason {
				return fmt.Errorf("revision %s, %s: %+v", o.Status.MachineDeploymentRevision, cond, c)
			}
			return nil
		})
		return o
	}
	for name := range mds {
		waitCondition(name, "1", osmv1alpha1.ConditionDrifted, metav1.ConditionFalse, osmv1alpha1.ReasonInSync)
	}

	// machine-controller, simulated: a template change gets a new revision (revision annotation and
	// observedGeneration) with the new machine not yet available; a moment later it is. Meanwhile the test
	// counts the MachineDeployments rolling at once.
	var mu sync.Mutex
	maxRolling, started := 0, []string{}
	stop := make(chan struct{})
	simDone := make(chan struct{})
	go func() {
		defer close(simDone)
		since := map[string]time.Time{}
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			list := &clusterv1alpha1.MachineDeploymentList{}
			if err := c.List(ctx, list, client.InNamespace("kube-system")); err != nil {
				continue
			}
			rolling := 0
			for i := range list.Items {
				md := &list.Items[i]
				if md.Spec.Template.Annotations[rollout.AnnotationRollout] == "" {
					continue
				}
				if !rollout.Finished(md) {
					rolling++
				}
				switch {
				case md.Status.ObservedGeneration < md.Generation:
					rev, _ := strconv.Atoi(md.Annotations[clusterv1alpha1.AnnotationRevision])
					patch := client.MergeFrom(md.DeepCopy())
					md.Annotations[clusterv1alpha1.AnnotationRevision] = strconv.Itoa(rev + 1)
					if err := c.Patch(ctx, md, patch); err != nil {
						continue
					}
					md.Status = clusterv1alpha1.MachineDeploymentStatus{ObservedGeneration: md.Generation, Replicas: 1, UpdatedReplicas: 0, AvailableReplicas: 1}
					if err := c.Status().Update(ctx, md); err != nil {
						continue
					}
					since[md.Name] = time.Now()
					mu.Lock()
					started = append(started, md.Name)
					mu.Unlock()
				case !rollout.Finished(md) && time.Since(since[md.Name]) > 1500*time.Millisecond:
					md.Status = clusterv1alpha1.MachineDeploymentStatus{ObservedGeneration: md.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
					_ = c.Status().Update(ctx, md)
				}
			}
			mu.Lock()
			maxRolling = max(maxRolling, rolling)
			mu.Unlock()
		}
	}()
	defer func() { close(stop); <-simDone }()

	t.Run("a profile bump drifts every MachineDeployment; rollout MachineDeployments roll one at a time; manual ones only report", func(t *testing.T) {
		bump("osp-fleet", "v1.1.0", "two")
		manual := waitCondition("manual", "1", osmv1alpha1.ConditionDrifted, metav1.ConditionTrue, osmv1alpha1.ReasonConfigurationChanged)
		d := manual.Status.Drift
		if d == nil || d.Since.IsZero() || d.Revision != "1" || d.ProvisionedProfileVersion != "v1.0.0" || !slices.Contains(d.Inputs, osc.InputProfile) ||
			slices.Contains(d.Inputs, osc.InputFlags) || d.ProvisionedDigest == d.CurrentDigest {
			t.Errorf("status.drift = %+v", d)
		}
		if msg := meta.FindStatusCondition(manual.Status.Conditions, osmv1alpha1.ConditionDrifted).Message; !strings.Contains(msg, "profile (v1.0.0 → v1.1.0)") {
			t.Errorf("Drifted message %q does not name the profile versions", msg)
		}
		waitForEvent(t, c, "manual", osmv1alpha1.ConditionDrifted)
		if v := gauge(t, "osm_machinedeployments_drifted"); v < 1 {
			t.Errorf("osm_machinedeployments_drifted = %v", v)
		}

		// One of the three starts; the other two queue. Removing the policy from a queued one stops it.
		var queued string
		eventually(t, wait, "one rollout started and the others queued", func() error {
			mu.Lock()
			n := len(started)
			mu.Unlock()
			if n == 0 {
				return fmt.Errorf("no rollout started")
			}
			for _, name := range []string{"roll-c", "roll-b", "roll-a"} {
				o, err := getOSC(name)
				if err != nil {
					return err
				}
				if c := meta.FindStatusCondition(o.Status.Conditions, osmv1alpha1.ConditionRollingOut); c != nil && c.Reason == osmv1alpha1.ReasonRolloutQueued {
					queued = name
					return nil
				}
			}
			return fmt.Errorf("nothing queued")
		})
		md := getMD(queued)
		patch := client.MergeFrom(md.DeepCopy())
		delete(md.Annotations, rollout.AnnotationPolicy)
		if err := c.Patch(ctx, md, patch); err != nil {
			t.Fatal(err)
		}
		waitCondition(queued, "1", osmv1alpha1.ConditionRollingOut, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutManual)

		for _, name := range []string{"roll-a", "roll-b", "roll-c"} {
			if name == queued {
				continue
			}
			eventually(t, 2*wait, name+" rolled out and finished", func() error {
				md := getMD(name)
				if md.Annotations[clusterv1alpha1.AnnotationRevision] != "2" || !rollout.Finished(md) {
					return fmt.Errorf("revision %s, status %+v", md.Annotations[clusterv1alpha1.AnnotationRevision], md.Status)
				}
				return nil
			})
			waitCondition(name, "2", osmv1alpha1.ConditionDrifted, metav1.ConditionFalse, osmv1alpha1.ReasonInSync)
			waitCondition(name, "2", osmv1alpha1.ConditionRollingOut, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutFinished)
			waitForNormalEvent(t, c, name, "RolloutStarted")
			waitForNormalEvent(t, c, name, osmv1alpha1.ReasonRolloutFinished)
		}
		absenceWindow(2 * time.Second)
		mu.Lock()
		defer mu.Unlock()
		if maxRolling != 1 || len(started) != 2 || slices.Contains(started, queued) {
			t.Errorf("rolling at once at most %d (want 1); started %v (without %s)", maxRolling, started, queued)
		}
		for _, name := range []string{"manual", queued} {
			if md := getMD(name); md.Spec.Template.Annotations[rollout.AnnotationRollout] != "" || md.Annotations[clusterv1alpha1.AnnotationRevision] != "1" {
				t.Errorf("%s was rolled: %v", name, md.Spec.Template.Annotations)
			}
			waitCondition(name, "1", osmv1alpha1.ConditionDrifted, metav1.ConditionTrue, osmv1alpha1.ReasonConfigurationChanged)
		}
	})

	openWindow := func(name string) {
		t.Helper()
		md := getMD(name)
		patch := client.MergeFrom(md.DeepCopy())
		delete(md.Annotations, rollout.AnnotationWindow)
		if err := c.Patch(ctx, md, patch); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a closed window holds the rollout; a render that failed never rolls", func(t *testing.T) {
		bump("osp-broken", "v1.1.0", "two")
		o := waitCondition("broken", "1", osmv1alpha1.ConditionRollingOut, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutWindowClosed)
		if !meta.IsStatusConditionTrue(o.Status.Conditions, osmv1alpha1.ConditionDrifted) {
			t.Errorf("conditions %+v", o.Status.Conditions)
		}
		bump("osp-broken", "v1.2.0", "{{ .Broken")
		waitCondition("broken", "1", osmv1alpha1.ConditionReady, metav1.ConditionFalse, osmv1alpha1.ReasonTemplateError)
		openWindow("broken")
		waitCondition("broken", "1", osmv1alpha1.ConditionRollingOut, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutRenderNotReady)
		if md := getMD("broken"); md.Spec.Template.Annotations[rollout.AnnotationRollout] != "" {
			t.Errorf("rolled out a failed render: %v", md.Spec.Template.Annotations)
		}
	})

	t.Run("a change that flips back before the rollout starts does not roll", func(t *testing.T) {
		bump("osp-flip", "v1.1.0", "two")
		waitCondition("flip", "1", osmv1alpha1.ConditionRollingOut, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutWindowClosed)
		bump("osp-flip", "v1.2.0", "one")
		o := waitCondition("flip", "1", osmv1alpha1.ConditionDrifted, metav1.ConditionFalse, osmv1alpha1.ReasonInSync)
		if o.Status.Drift != nil {
			t.Errorf("status.drift = %+v", o.Status.Drift)
		}
		waitForNormalEvent(t, c, "flip", "DriftResolved")
		openWindow("flip")
		absenceWindow(3 * time.Second)
		if md := getMD("flip"); md.Spec.Template.Annotations[rollout.AnnotationRollout] != "" {
			t.Errorf("rolled out after a flip back: %v", md.Spec.Template.Annotations)
		}
	})
}

// waitForNormalEvent waits for a Normal event with reason on the MachineDeployment mdName.
func waitForNormalEvent(t *testing.T, c client.Client, mdName, reason string) {
	t.Helper()
	eventually(t, wait, "Normal event "+reason+" on "+mdName, func() error {
		events := &corev1.EventList{}
		if err := c.List(context.Background(), events, client.InNamespace("kube-system")); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == mdName && e.Reason == reason && e.Type == corev1.EventTypeNormal {
				return nil
			}
		}
		return fmt.Errorf("no %s event", reason)
	})
}

// gauge reads a gauge of the controller's metrics registry.
func gauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.Metric) > 0 {
			return f.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
