package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
)

// refusingPolicy is the name of the ValidatingAdmissionPolicy (and of its binding) that refuses the
// controller's write; the API server's refusal names it, so the event and the condition must too.
const refusingPolicy = "osm-test-refuses-writes"

// refusalWindow is how long the test watches a MachineDeployment whose write is refused.
const refusalWindow = 30 * time.Second

// TestRefusedWriteBacksOffAndIsVisible runs the controller against a real API server whose admission refuses
// one of its writes, with a ValidatingAdmissionPolicy (no webhook): the finalizer patch of the
// MachineDeployment, or the create of the user-data Secrets. The controller must not loop on the refusal: its
// reconciles of the MachineDeployment stay within what controller-runtime's exponential backoff allows (a
// loop ran 373 reconciles in 95 s). It must say so where an operator looks: a Warning event WriteFailed on the
// MachineDeployment, naming the policy, and, where there is an OSC to carry it, Ready=False WriteFailed. Once
// the policy is gone, the MachineDeployment renders without anyone touching it.
func TestRefusedWriteBacksOffAndIsVisible(t *testing.T) {
	// Not parallel, nor are its subtests: oscReconciles counts the reconciles of every controller in the process.
	for _, tc := range []struct {
		name string
		md   string
		// match is the requests the policy refuses.
		match admissionregistrationv1.MatchResources
		// probe makes a dry-run request of the kind the policy refuses, to wait until the API server enforces it.
		probe func(ctx context.Context, t testing.TB, c client.Client) error
		// oscReports says whether the MachineDeployment gets an OSC to report the failure on: not while its
		// finalizer is refused, which must be in place before OSM creates anything for it.
		oscReports bool
	}{
		{
			name: "finalizer patch of the MachineDeployment",
			md:   "refused-finalizer",
			match: admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{clusterv1alpha1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"machinedeployments"}},
				},
			}}},
			probe: func(ctx context.Context, t testing.TB, c client.Client) error {
				// A MachineDeployment without a profile, which OSM leaves alone.
				probe := newMD(t, "refusal-probe", "ubuntu", "aws", "")
				if err := c.Create(ctx, probe); client.IgnoreAlreadyExists(err) != nil {
					return err
				}
				if err := c.Get(ctx, client.ObjectKeyFromObject(probe), probe); err != nil {
					return err
				}
				patch := client.MergeFrom(probe.DeepCopy())
				probe.Labels = map[string]string{"probe": "1"}
				return c.Patch(ctx, probe, patch, client.DryRunAll)
			},
		},
		{
			name: "create of the user-data Secrets",
			md:   "refused-secret",
			match: admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: userDataNS}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
					},
				}},
			},
			probe: func(ctx context.Context, _ testing.TB, c client.Client) error {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: userDataNS, Name: "refusal-probe"}}
				return c.Create(ctx, s, client.DryRunAll)
			},
			oscReports: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{})
			ctx := context.Background()
			c := env.Client
			ensureNamespace(t, env, userDataNS)
			clusterInfo(t, env)
			profile := &osmv1alpha1.OperatingSystemProfile{}
			readYAMLFile(t, filepath.Join(testenv.RepoRoot(), "crds", "testdata", "upstream", "osp-ubuntu.yaml"), profile)
			if err := c.Create(ctx, profile); err != nil {
				t.Fatal(err)
			}

			fail := admissionregistrationv1.Fail
			policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: refusingPolicy},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
					FailurePolicy:    &fail,
					MatchConstraints: &tc.match,
					Validations:      []admissionregistrationv1.Validation{{Expression: "false", Message: "refused by the test"}},
				},
			}
			binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
				ObjectMeta: metav1.ObjectMeta{Name: refusingPolicy},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: refusingPolicy,
					ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
			}
			for _, o := range []client.Object{policy, binding} {
				if err := c.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			// The API server loads policies asynchronously; the controller must meet the refusal from its first
			// write on.
			eventually(t, wait, "the API server enforcing the policy", func() error {
				err := tc.probe(ctx, t, c)
				if err == nil {
					return errors.New("the probe was admitted")
				}
				if !strings.Contains(err.Error(), refusingPolicy) {
					return err
				}
				return nil
			})

			metrics := testenv.FreeAddress(t)
			startOSM(t, env, nil, app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true, WorkerCount: 2,
				MetricsAddress: metrics})
			var before int
			eventually(t, wait, "the controller's metrics endpoint", func() error {
				var err error
				before, err = oscReconciles(metrics)
				return err
			})

			md := newMD(t, tc.md, "ubuntu", "aws", "osp-ubuntu")
			start := time.Now() // before the create: the first reconcile may begin before it returns
			if err := c.Create(ctx, md); err != nil {
				t.Fatal(err)
			}
			// Nothing but the backoff brings the MachineDeployment back while its write is refused (the watches
			// ignore OSM's own writes), so the backoff is the whole bound. Checked as it goes, so that a loop
			// fails at once instead of after the window.
			reconciles := 0
			bounded := func() {
				t.Helper()
				now, err := oscReconciles(metrics)
				if err != nil {
					t.Fatal(err)
				}
				reconciles = now - before
				if allowed := backoffAllows(time.Since(start)); reconciles > allowed {
					t.Fatalf("%d reconciles of %s in %s while its write is refused; exponential backoff allows %d",
						reconciles, md.Name, time.Since(start).Round(time.Millisecond), allowed)
				}
			}
			for time.Since(start) < refusalWindow {
				time.Sleep(time.Second) // the window the reconciles are bounded over, not ordering
				bounded()
			}
			t.Logf("%d reconciles of %s in %s while its write was refused (backoff allows %d)",
				reconciles, md.Name, time.Since(start).Round(time.Millisecond), backoffAllows(time.Since(start)))
			if reconciles < 2 {
				t.Errorf("%d reconciles in %s: a refused write is to be retried", reconciles, refusalWindow)
			}

			waitForEvent(t, c, md.Name, osmv1alpha1.ReasonWriteFailed)
			events := &corev1.EventList{}
			if err := c.List(ctx, events, client.InNamespace(md.Namespace)); err != nil {
				t.Fatal(err)
			}
			for _, e := range events.Items {
				if e.InvolvedObject.Name == md.Name && e.Reason == osmv1alpha1.ReasonWriteFailed && !strings.Contains(e.Message, refusingPolicy) {
					t.Errorf("the WriteFailed event does not say what refused the write: %s", e.Message)
				}
			}
			if tc.oscReports {
				waitForNotReady(t, c, render.OSCName(md), osmv1alpha1.ReasonWriteFailed, refusingPolicy)
			}

			bounded()

			// The policy goes; the retry already scheduled renders the MachineDeployment.
			for _, o := range []client.Object{binding, policy} {
				if err := c.Delete(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			// The longest the backoff waits after the failures so far (and a failure or two more while the API
			// server drops the policy).
			next := backoffDelay(reconciles + 2)
			bootstrap := render.BootstrapSecretName(md)
			eventually(t, next+wait, "the bootstrap Secret once the policy is gone", func() error {
				return c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: bootstrap}, &corev1.Secret{})
			})
			waitForSecret(t, c, bootstrap, "1")
			waitForSecret(t, c, render.ProvisioningSecretName(md), "1")
			eventually(t, wait, "the OSC Ready", func() error {
				osc := &osmv1alpha1.OperatingSystemConfig{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(md)}, osc); err != nil {
					return err
				}
				if !meta.IsStatusConditionTrue(osc.Status.Conditions, osmv1alpha1.ConditionReady) {
					return fmt.Errorf("conditions: %+v", osc.Status.Conditions)
				}
				return nil
			})
		})
	}
}

// oscReconciles reads the OperatingSystemConfig controller's reconciles, of every result, from the
// controller's metrics endpoint at addr. The counter is process-wide: callers take differences.
func oscReconciles(addr string) (int, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("metrics: %s", resp.Status)
	}
	total := 0.0
	for _, s := range parseMetrics(string(body), "controller_runtime_reconcile_total") {
		if s.labels["controller"] == "operatingsystemconfig" {
			total += s.value
		}
	}
	return int(total), nil
}

// rateLimiter is the per-item backoff controller-runtime gives a controller that sets none (OSM's do not):
// 5 ms doubling per failure, up to 1000 s.
func rateLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second)
}

// backoffAllows is how many reconciles of one object that fails every time fit in d under the backoff: the
// first at once, each next one the backoff's delay after the previous one ended (reconciles taking no time).
func backoffAllows(d time.Duration) int {
	rl := rateLimiter()
	n, at := 1, time.Duration(0)
	for {
		at += rl.When("md")
		if at > d {
			return n
		}
		n++
	}
}

// backoffDelay is the backoff's delay after the n-th failure in a row.
func backoffDelay(n int) time.Duration {
	rl := rateLimiter()
	var d time.Duration
	for range n {
		d = rl.When("md")
	}
	return d
}
