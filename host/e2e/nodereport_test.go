//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
)

// phaseRecorder follows a MachineDeployment's OperatingSystemNodeReport with a watch, so that every phase a
// machine reports is seen, however fast the next one follows (sdk/SPEC.md §11).
type phaseRecorder struct {
	mu     sync.Mutex
	phases map[string][]osmv1alpha1.BootstrapPhase
	last   map[string]osmv1alpha1.MachineBootstrapReport
	md     *clusterv1alpha1.MachineDeployment
}

// watchReports starts recording md's reports; it stops when the test ends.
func (c *cluster) watchReports(t *testing.T, md *clusterv1alpha1.MachineDeployment) *phaseRecorder {
	t.Helper()
	wc, err := client.NewWithWatch(c.cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &osmv1alpha1.OperatingSystemNodeReportList{}, client.InNamespace(userDataNS),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", render.ProvisioningSecretName(md))})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p := &phaseRecorder{phases: map[string][]osmv1alpha1.BootstrapPhase{}, last: map[string]osmv1alpha1.MachineBootstrapReport{}, md: md}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if r, ok := ev.Object.(*osmv1alpha1.OperatingSystemNodeReport); ok && ev.Type != watch.Error {
				p.record(r)
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return p
}

func (p *phaseRecorder) record(r *osmv1alpha1.OperatingSystemNodeReport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, m := range r.Status.Machines {
		seen := p.phases[name]
		if len(seen) == 0 || seen[len(seen)-1] != m.Phase {
			p.phases[name] = append(seen, m.Phase)
		}
		p.last[name] = m
	}
}

// seen returns the phases machine reported, in order, and its last report.
func (p *phaseRecorder) seen(machine string) ([]osmv1alpha1.BootstrapPhase, osmv1alpha1.MachineBootstrapReport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.phases[machine]), p.last[machine]
}

// waitFor waits until machine reported phase; the join watcher reads the Node every 10 s.
func (p *phaseRecorder) waitFor(machine string, phase osmv1alpha1.BootstrapPhase, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		phases, _ := p.seen(machine)
		if slices.Contains(phases, phase) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("machine %s reported %v, not %s, within %s", machine, phases, phase, timeout)
		}
		time.Sleep(time.Second) // polling interval
	}
}

// checkReportedPhases: the machine reported every phase of a bootstrap that went well, in order, and the OSC
// counts it as joined.
func checkReportedPhases(t testing.TB, c *cluster, p *phaseRecorder, machine string) string {
	phases, _ := p.seen(machine)
	// In order; a step osm-setup retried reports its phases again.
	next := 0
	for _, ph := range phases {
		if next < len(osmv1alpha1.BootstrapPhases) && ph == osmv1alpha1.BootstrapPhases[next] {
			next++
		}
	}
	if next != len(osmv1alpha1.BootstrapPhases) || len(phases) == 0 || phases[len(phases)-1] != osmv1alpha1.PhaseNodeRegistered {
		t.Errorf("machine %s reported %v, want %v in order, ending registered", machine, phases, osmv1alpha1.BootstrapPhases)
	}
	osc := &osmv1alpha1.OperatingSystemConfig{}
	testenv.Eventually(t, time.Minute, "the OSC counts "+machine+" as joined", func() error {
		if err := c.c.Get(context.Background(), client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(p.md)}, osc); err != nil {
			return err
		}
		if n := osc.Status.Nodes; n == nil || n.Joined != 1 || n.Failed != 0 {
			return fmt.Errorf("status.nodes = %+v", n)
		}
		return nil
	})
	var names []string
	for _, ph := range phases {
		names = append(names, string(ph))
	}
	return strings.Join(names, " → ")
}

// testPackageFailureIsReported boots a Debian node whose profile asks for a package the distribution does not
// have: osm-setup fails installing packages, and within a minute of the node's report the OSC names the
// machine with the step, apt's exit code and the line that says why; the MachineDeployment gets a Warning.
func testPackageFailureIsReported(t *testing.T, c *cluster) {
	const missing = "osm-e2e-no-such-package"
	osp := c.airgappedProfile(t, "osp-debian-12", "osp-debian-12-missing-package", map[string]string{"containerdSource": "preinstalled", "extraPackages": missing})
	md := c.createMD(t, "e2e-missing-package", "debian", osp.Name)
	p := c.watchReports(t, md)
	boot, _ := c.userData(t, md)
	nodeName := md.Name
	n := bootNode(t, nodeOptions{Name: nodeName, UserData: machineUserData(boot.Data[render.CloudConfigKey], nodeName), Units: debianUnits, Lifetime: 8 * time.Minute})
	err := p.waitFor(nodeName, osmv1alpha1.PhaseFailed, 6*time.Minute)
	r := n.collect()
	if err != nil {
		r.diagnose(t, bootstrapUnit, setupUnit)
		t.Fatal(err)
	}
	phases, last := p.seen(nodeName)
	if len(phases) < 3 || !slices.Equal(phases[:3], []osmv1alpha1.BootstrapPhase{osmv1alpha1.PhaseFetched, osmv1alpha1.PhaseApplied, osmv1alpha1.PhaseFailed}) {
		t.Errorf("phases %v, want Fetched, Applied, Failed", phases)
	}
	if last.Step != "packages" || last.ExitCode == nil || *last.ExitCode != 100 {
		t.Errorf("report %+v, want step packages, exit code 100 (apt-get)", last)
	}
	osc := &osmv1alpha1.OperatingSystemConfig{}
	testenv.Eventually(t, time.Minute, "the OSC names the failing machine", func() error {
		if err := c.c.Get(context.Background(), client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(md)}, osc); err != nil {
			return err
		}
		n := osc.Status.Nodes
		if n == nil || n.Failed != 1 || len(n.Failing) != 1 {
			return fmt.Errorf("status.nodes = %+v", n)
		}
		f := n.Failing[0]
		if f.Name != nodeName || f.Step != "packages" || !slices.ContainsFunc(f.LogTail, func(l string) bool { return strings.Contains(l, "Unable to locate package "+missing) }) {
			return fmt.Errorf("failing %+v", f)
		}
		return nil
	})
	t.Logf("the OSC names %s: step %s, exit code %d, log tail:\n  %s", nodeName, osc.Status.Nodes.Failing[0].Step, *osc.Status.Nodes.Failing[0].ExitCode,
		strings.Join(osc.Status.Nodes.Failing[0].LogTail, "\n  "))
	waitForWarning(t, c, md.Name, "MachineBootstrapFailed")
}

// waitForWarning waits for a Warning event with reason on the MachineDeployment mdName.
func waitForWarning(t *testing.T, c *cluster, mdName, reason string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "a "+reason+" event on "+mdName, func() error {
		events, err := c.cs.CoreV1().Events(osmNamespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == mdName && e.Reason == reason && e.Type == "Warning" {
				return nil
			}
		}
		return fmt.Errorf("no %s event", reason)
	})
}
