package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins"
)

// controllerAgent is the user agent of the controller under test, to tell its requests from the test's.
const controllerAgent = "osm-controller-under-test"

// auditPolicy records every write with its body, so a test can count the controller's writes and bytes.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: Metadata
  verbs: ["get"]
- level: None
`

// auditedWrite is one write request the API server recorded.
type auditedWrite struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	Stage     string `json:"stage"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	RequestObject json.RawMessage `json:"requestObject"`
}

// startAudited starts a control plane that writes an audit log of every write, and returns it with the log's
// path.
func startAudited(t *testing.T) (*testenv.Env, string) {
	dir := t.TempDir()
	policy, logPath := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{APIServerFlags: map[string]string{
		"audit-policy-file": policy, "audit-log-path": logPath, "audit-log-format": "json", "audit-log-mode": "blocking",
	}})
	return env, logPath
}

// controllerWritesIn reads the controller's completed writes from the audit log.
func controllerWritesIn(t *testing.T, path string) []auditedWrite {
	t.Helper()
	return controllerRequestsIn(t, path, func(verb string) bool { return verb != "get" })
}

// controllerGetsIn reads the controller's completed gets of single objects (reads past its caches).
func controllerGetsIn(t *testing.T, path string) []auditedWrite {
	t.Helper()
	return controllerRequestsIn(t, path, func(verb string) bool { return verb == "get" })
}

func controllerRequestsIn(t *testing.T, path string, verb func(string) bool) []auditedWrite {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditedWrite
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		var w auditedWrite
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatal(err)
		}
		// Profiles' status is the profile controller's business, not a MachineDeployment's.
		if w.Stage == "ResponseComplete" && strings.HasPrefix(w.UserAgent, controllerAgent) && w.ObjectRef.Resource != "operatingsystemprofiles" && verb(w.Verb) {
			out = append(out, w)
		}
	}
	return out
}

// TestAPIWritesPerMachineDeployment measures what the controller writes for new MachineDeployments created
// the way machine-controller creates them (the revision annotation follows the create): every write by verb
// and resource, and the bytes sent. Each user-data Secret is written once, at the revision machine-controller
// waits for; an idle controller writes nothing.
func TestAPIWritesPerMachineDeployment(t *testing.T) {
	t.Parallel()
	env, auditLog := startAudited(t)
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	var ubuntu *osmv1alpha1.OperatingSystemProfile
	for _, d := range defaults {
		if d.Name == "osp-ubuntu" {
			ubuntu = d.DeepCopy()
		}
	}
	if ubuntu == nil {
		t.Fatal("no default osp-ubuntu")
	}
	ubuntu.Namespace = osmNamespace
	if err := c.Create(ctx, ubuntu); err != nil {
		t.Fatal(err)
	}
	controller := *env
	controller.Config = rest.CopyConfig(env.Config)
	controller.Config.UserAgent = controllerAgent
	startOSM(t, &controller, nil, app.Options{Builtins: plugins.Builtin(), DisableDefaultOSPs: true, WorkerCount: 4})

	const n = 5
	before, beforeGets := len(controllerWritesIn(t, auditLog)), len(controllerGetsIn(t, auditLog))
	var mds []*clusterv1alpha1.MachineDeployment
	for i := range n {
		md := newMD(t, fmt.Sprintf("writes-%d", i), "ubuntu", "aws", "osp-ubuntu")
		delete(md.Annotations, clusterv1alpha1.AnnotationRevision)
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		mds = append(mds, md)
	}
	// Without a revision nothing is written. (The count below, from creation on, is the strict check: each
	// Secret written once.)
	absenceWindow(2 * time.Second)
	for _, w := range controllerWritesIn(t, auditLog)[before:] {
		t.Errorf("wrote %s %s/%s before the MachineDeployment had a revision", w.Verb, w.ObjectRef.Resource, w.ObjectRef.Name)
	}

	// machine-controller sets the first revision.
	for _, md := range mds {
		if err := c.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
			t.Fatal(err)
		}
		md.Annotations[clusterv1alpha1.AnnotationRevision] = "1"
		if err := c.Update(ctx, md); err != nil {
			t.Fatal(err)
		}
	}
	for _, md := range mds {
		waitForSecret(t, c, md.Name+"-kube-system-bootstrap-config", "1")
	}
	// The whole write set of a new MachineDeployment: one node credential (bootstrap token, Role, RoleBinding),
	// the two user-data Secrets, the OSC created with its status, the finalizer, the object its nodes report
	// into. A ServiceAccount or a token request would be a second credential, a status write a second write of
	// the OSC (the node reports' summary is written only once a machine reported).
	want := map[string]int{
		"create secrets": 3, "create roles": 1, "create rolebindings": 1, "create operatingsystemconfigs": 1,
		"patch machinedeployments": 1, "create operatingsystemnodereports": 1,
	}
	expected := 0
	for _, per := range want {
		expected += per * n
	}
	// Let every write land, then check that nothing more is written while idle.
	eventually(t, wait, "the controller's writes for the MachineDeployments", func() error {
		if got := len(controllerWritesIn(t, auditLog)) - before; got < expected {
			return fmt.Errorf("%d writes, want at least %d", got, expected)
		}
		return nil
	})
	settled := len(controllerWritesIn(t, auditLog))
	absenceWindow(3 * time.Second)
	all := controllerWritesIn(t, auditLog)
	if len(all) != settled {
		for _, w := range all[settled:] {
			t.Errorf("idle write: %s %s/%s %s", w.Verb, w.ObjectRef.Resource, w.ObjectRef.Subresource, w.ObjectRef.Name)
		}
	}

	writes := all[before:settled]
	perKind, bytesPerKind := map[string]int{}, map[string]int{}
	bytes := 0
	secretWrites := map[string]int{}
	for _, w := range writes {
		kind := w.Verb + " " + w.ObjectRef.Resource
		if w.ObjectRef.Subresource != "" {
			kind += "/" + w.ObjectRef.Subresource
		}
		perKind[kind]++
		bytesPerKind[kind] += len(w.RequestObject)
		bytes += len(w.RequestObject)
		if w.ObjectRef.Resource == "secrets" && w.ObjectRef.Namespace == userDataNS {
			secretWrites[w.ObjectRef.Name]++
		}
	}
	var lines []string
	for k, v := range perKind {
		lines = append(lines, fmt.Sprintf("%-40s %5.1f writes %7.0f bytes", k, float64(v)/n, float64(bytesPerKind[k])/n))
	}
	sort.Strings(lines)
	t.Logf("writes per MachineDeployment (%d MachineDeployments): %.1f, %.0f bytes\n%s", n, float64(len(writes))/n, float64(bytes)/n, strings.Join(lines, "\n"))
	for kind := range perKind {
		if _, ok := want[kind]; !ok {
			want[kind] = 0
		}
	}
	for kind, per := range want {
		if perKind[kind] != per*n {
			t.Errorf("%s: %d writes for %d MachineDeployments, want %d each", kind, perKind[kind], n, per)
		}
	}
	// Nor does it read an object past its caches for them: the API server serves the caches' watches, and each
	// such read (the OSC twice and the reader Role once per MachineDeployment, before) is one more request.
	for _, g := range controllerGetsIn(t, auditLog)[beforeGets:] {
		if g.ObjectRef.Resource == "configmaps" && g.ObjectRef.Name == "cluster-info" {
			continue // read once per process, by the first render (clusterinfo)
		}
		t.Errorf("read %s %s/%s past the cache for a new MachineDeployment", g.ObjectRef.Resource, g.ObjectRef.Namespace, g.ObjectRef.Name)
	}
	for _, md := range mds {
		for _, s := range []string{"-kube-system-bootstrap-config", "-kube-system-provisioning-config"} {
			if got := secretWrites[md.Name+s]; got != 1 {
				t.Errorf("%s%s written %d times, want once", md.Name, s, got)
			}
		}
	}
}
