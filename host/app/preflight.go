package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/osmhq/osm/host/webhooks"
)

// A start-up check: before the manager starts, the controller asks the API servers whether they serve the kinds
// it watches and whether its identity may do what it does. Without them its caches never sync, and it would sit
// there rendering nothing, with only reflector errors in the log (what an operator who swapped upstream's image
// into a cluster with upstream's CRDs and RBAC saw). Instead the controller names every missing piece at once,
// with the manifest that adds it, and exits.

// Problem is one thing the controller lacks.
type Problem struct {
	// Cluster is "management" or "worker" (the same API server when there is no -worker-cluster-kubeconfig).
	Cluster string
	// What names the missing kind or permission.
	What string
	// Fix says what adds it.
	Fix string
}

func (p Problem) String() string { return p.Cluster + " cluster: " + p.What + " (" + p.Fix + ")" }

// PreflightError lists every Problem found.
type PreflightError struct{ Problems []Problem }

func (e *PreflightError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the controller cannot run: %d missing (CRDs and RBAC of deploy/, see docs/migration.md):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - " + p.String())
	}
	return b.String()
}

const (
	fixCRDs = "apply OSM's CRDs: kubectl apply -k deploy/ (or crds/)"
	fixRBAC = "apply OSM's RBAC: deploy/rbac.yaml"
)

// kindCheck is a resource the controller watches or writes, and the subresources it needs.
type kindCheck struct {
	groupVersion, resource string
	subresources           []string
	why                    string
}

var mgmtKinds = []kindCheck{
	{"operatingsystemmanager.k8c.io/v1alpha1", "operatingsystemprofiles", []string{"status"}, "profiles"},
	{"operatingsystemmanager.k8c.io/v1alpha1", "operatingsystemconfigs", nil, "rendered configurations"},
	{"operatingsystemmanager.k8c.io/v1alpha1", "operatingsystemprofileextensions", []string{"status"}, "profile extensions"},
}

var workerKinds = []kindCheck{
	{"cluster.k8s.io/v1alpha1", "machinedeployments", nil, "machine-controller's MachineDeployments"},
}

// access is a permission the controller uses; namespace "" is cluster-wide. Namespaces are the defaults'
// names, mapped to the controller's (-namespace, the user-data namespace) by preflight.
type access struct {
	group, resource, subresource, namespace, name string
	verbs                                         []string
	// fix says what grants it; fixRBAC when empty.
	fix string
}

const (
	nsController = "kube-system"
	nsUserData   = "cloud-init-settings"
)

// mgmtAccess and workerAccess are what deploy/rbac.yaml grants, because the controller uses all of it (the
// integration test checks both ways: deploy/rbac.yaml passes, upstream's RBAC names what it lacks).
var mgmtAccess = []access{
	{group: "operatingsystemmanager.k8c.io", resource: "operatingsystemprofiles", verbs: []string{"get", "list", "watch", "create", "update"}},
	{group: "operatingsystemmanager.k8c.io", resource: "operatingsystemconfigs", verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	{group: "operatingsystemmanager.k8c.io", resource: "operatingsystemprofileextensions", verbs: []string{"get", "list", "watch"}},
	{group: "operatingsystemmanager.k8c.io", resource: "operatingsystemprofiles", subresource: "status", verbs: []string{"update", "patch"}},
	{group: "operatingsystemmanager.k8c.io", resource: "operatingsystemprofileextensions", subresource: "status", verbs: []string{"update", "patch"}},
}

var workerAccess = []access{
	{group: "cluster.k8s.io", resource: "machinedeployments", verbs: []string{"get", "list", "watch", "patch", "update"}},
	{resource: "events", verbs: []string{"create"}},
	{group: "discovery.k8s.io", resource: "endpointslices", verbs: []string{"list"}},
	{resource: "secrets", namespace: nsUserData, verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
	{group: "rbac.authorization.k8s.io", resource: "roles", namespace: nsUserData, verbs: []string{"get", "list", "watch", "create", "delete"}},
	{group: "rbac.authorization.k8s.io", resource: "rolebindings", namespace: nsUserData, verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
	{resource: "secrets", namespace: nsController, verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	{resource: "configmaps", namespace: "kube-public", name: "cluster-info", verbs: []string{"get"}},
}

const fixWebhookRBAC = "apply the webhooks component's RBAC: deploy/webhooks/rbac.yaml (docs/operations.md)"

// webhookAccess is what serving the admission webhooks takes beyond mgmtAccess (deploy/webhooks' RBAC): the
// configurations are watched and filled in by this controller in every certificate mode but the external one, and
// with its own certificate (WebhookCertsSelf) the rotator keeps the key pair in a Secret. Checked at start, since
// without them the rotator gives up after seconds and the controller would exit with the refusal buried in its log.
func webhookAccess(s *WebhookServing) []access {
	if s == nil || s.Certs == WebhookCertsExternal {
		return nil
	}
	d := s.withDefaults()
	out := []access{
		{group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", verbs: []string{"get", "list", "watch"}},
		{group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", verbs: []string{"get", "list", "watch"}},
		{group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", name: webhooks.ValidatingConfigName, verbs: []string{"update"}},
		{group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", name: webhooks.MutatingConfigName, verbs: []string{"update"}},
	}
	if d.Certs == WebhookCertsSelf {
		out = append(out, access{resource: "secrets", namespace: nsController, name: d.SecretName, verbs: []string{"get", "update"}})
	}
	for i := range out {
		out[i].fix = fixWebhookRBAC
	}
	return out
}

// verificationAccess is what reading the plugin signature policy takes: get on its ConfigMap and on the
// ConfigMaps and Secrets of its keys, in the controller's namespace (Secrets are granted there already).
// Without it every image the policy covers would be refused as "forbidden" at its first pull.
func verificationAccess(policy string) []access {
	if policy == "" {
		return nil
	}
	return []access{{resource: "configmaps", namespace: nsController, verbs: []string{"get"}}}
}

var leaseAccess = access{group: "coordination.k8s.io", resource: "leases", namespace: nsController, verbs: []string{"get", "create", "update"}}

// PreflightOptions say where the controller runs.
type PreflightOptions struct {
	Mgmt, Worker *rest.Config
	// Namespace is -namespace; UserDataNamespace is where the user-data Secrets go.
	Namespace, UserDataNamespace string
	LeaderElect                  bool
	// Webhooks is how the admission webhooks are served, nil when they are off.
	Webhooks *WebhookServing
	// VerificationPolicy is -plugin-verification-policy: the ConfigMap, in Namespace, of the plugin
	// signature policy, whose keys are ConfigMaps and Secrets there too ("" when plugins are not verified).
	VerificationPolicy string
}

// Preflight returns the kinds and permissions the controller lacks, or nil. Errors talking to the API servers
// are returned as they are (the caller starts anyway: the manager reports those itself).
func Preflight(ctx context.Context, o PreflightOptions) ([]Problem, error) {
	worker := o.Worker
	names := map[string]string{"mgmt": "management", "worker": "worker"}
	if worker == nil {
		worker = o.Mgmt
		names = map[string]string{"mgmt": "the", "worker": "the"}
	}
	var problems []Problem
	for _, c := range []struct {
		cfg    *rest.Config
		name   string
		kinds  []kindCheck
		access []access
	}{
		{o.Mgmt, names["mgmt"], mgmtKinds, append(append(leases(mgmtAccess, o.LeaderElect), webhookAccess(o.Webhooks)...), verificationAccess(o.VerificationPolicy)...)},
		{worker, names["worker"], workerKinds, workerAccess},
	} {
		cfg := rest.CopyConfig(c.cfg)
		// Some forty reviews at once; client-go's default limit would spread them over seconds.
		cfg.QPS, cfg.Burst = 200, 200
		// The two clients the check uses, not a whole clientset: building one constructs a client for every
		// API group, code the controller never runs again but whose pages of the executable then stay resident.
		disco, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return nil, err
		}
		authz, err := authorizationv1client.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		p, err := missingKinds(disco, c.name, c.kinds)
		if err != nil {
			return nil, err
		}
		problems = append(problems, p...)
		p, err = missingAccess(ctx, authz, c.name, c.access, o.Namespace, o.UserDataNamespace)
		if err != nil {
			return nil, err
		}
		problems = append(problems, p...)
	}
	return problems, nil
}

func leases(a []access, leaderElect bool) []access {
	if !leaderElect {
		return a
	}
	return append(slices.Clone(a), leaseAccess)
}

func missingKinds(d discovery.DiscoveryInterface, cluster string, kinds []kindCheck) ([]Problem, error) {
	var out []Problem
	served := map[string][]metav1.APIResource{}
	for _, k := range kinds {
		list, ok := served[k.groupVersion]
		if !ok {
			l, err := d.ServerResourcesForGroupVersion(k.groupVersion)
			if err != nil && !isNotFound(err) {
				return nil, fmt.Errorf("discovering %s: %w", k.groupVersion, err)
			}
			if l != nil {
				list = l.APIResources
			}
			served[k.groupVersion] = list
		}
		have := map[string]bool{}
		for _, r := range list {
			have[r.Name] = true
		}
		group := strings.Split(k.groupVersion, "/")[0]
		switch {
		case !have[k.resource]:
			fix := fixCRDs
			if group == "cluster.k8s.io" {
				fix = "install machine-controller, whose CRDs define MachineDeployments"
			}
			out = append(out, Problem{Cluster: cluster, What: fmt.Sprintf("no kind %s.%s (%s) is served: its CRD is missing", k.resource, k.groupVersion, k.why), Fix: fix})
		default:
			for _, sub := range k.subresources {
				if !have[k.resource+"/"+sub] {
					out = append(out, Problem{Cluster: cluster, What: fmt.Sprintf("%s.%s has no %s subresource: its CRD is an older one (upstream OSM's?)", k.resource, group, sub), Fix: fixCRDs})
				}
			}
		}
	}
	return out, nil
}

func isNotFound(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "the server could not find the requested resource") || strings.Contains(err.Error(), "not found"))
}

// missingAccess asks the API server, with one SelfSubjectAccessReview per verb, what the controller may not do,
// and groups the refusals by resource.
func missingAccess(ctx context.Context, authz authorizationv1client.AuthorizationV1Interface, cluster string, want []access, namespace, userData string) ([]Problem, error) {
	type job struct {
		a    access
		verb string
	}
	var jobs []job
	for _, a := range want {
		switch a.namespace {
		case nsController:
			a.namespace = namespace
		case nsUserData:
			a.namespace = userData
		}
		for _, v := range a.verbs {
			jobs = append(jobs, job{a, v})
		}
	}
	denied := make([]bool, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r, err := authz.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: j.a.namespace, Verb: j.verb, Group: j.a.group, Resource: j.a.resource, Subresource: j.a.subresource, Name: j.a.name,
				}},
			}, metav1.CreateOptions{})
			if err != nil {
				errs[i] = err
				return
			}
			denied[i] = !r.Status.Allowed
		}()
	}
	wg.Wait()
	var out []Problem
	for k := 0; k < len(jobs); {
		// jobs of one access are adjacent
		a := jobs[k].a
		var verbs []string
		n := len(a.verbs)
		for i := k; i < k+n; i++ {
			if errs[i] != nil {
				return nil, fmt.Errorf("asking the API server what the controller may do: %w", errs[i])
			}
			if denied[i] {
				verbs = append(verbs, jobs[i].verb)
			}
		}
		k += n
		if len(verbs) == 0 {
			continue
		}
		res := a.resource
		if a.subresource != "" {
			res += "/" + a.subresource
		}
		if a.group != "" {
			res += "." + a.group
		}
		if a.name != "" {
			res += " " + a.name
		}
		where := "cluster-wide"
		if a.namespace != "" {
			where = "in namespace " + a.namespace
		}
		fix := a.fix
		if fix == "" {
			fix = fixRBAC
		}
		out = append(out, Problem{Cluster: cluster, What: fmt.Sprintf("may not %s %s %s", strings.Join(verbs, ", "), res, where), Fix: fix})
	}
	return out, nil
}

// preflight runs Preflight for New. When something is missing, it says so on every MachineDeployment that names
// a profile (a Warning event, best effort: the identity may lack that too), so that `kubectl describe` shows why
// nothing renders, and returns a PreflightError.
func preflight(ctx context.Context, o Options) error {
	po := PreflightOptions{Mgmt: o.Mgmt, Worker: o.Worker, Namespace: o.Settings.Namespace,
		UserDataNamespace: o.Settings.CloudInitSettingsNamespace, LeaderElect: o.LeaderElect,
		VerificationPolicy: o.PluginVerificationPolicy}
	if o.Webhook.Port != 0 {
		po.Webhooks = &o.WebhookServing
	}
	problems, err := Preflight(ctx, po)
	if err != nil {
		o.Logger.Error(err, "start-up check skipped: the API server did not answer it; starting anyway")
		return nil
	}
	if len(problems) == 0 {
		o.Logger.Info("start-up check passed: CRDs served, RBAC complete")
		return nil
	}
	perr := &PreflightError{Problems: problems}
	worker := o.Worker
	if worker == nil {
		worker = o.Mgmt
	}
	if n := announce(ctx, worker, perr); n > 0 {
		o.Logger.Info("start-up check failed; said so on the MachineDeployments", "events", n)
	}
	return perr
}

// PreflightEventReason is the reason of the events preflight records.
const PreflightEventReason = "ControllerCannotRun"

// announce records perr as a Warning event on up to 100 MachineDeployments that name a profile, and returns
// how many it recorded.
func announce(ctx context.Context, cfg *rest.Config, perr *PreflightError) int {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return 0
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return 0
	}
	list, err := dyn.Resource(schema.GroupVersionResource{Group: "cluster.k8s.io", Version: "v1alpha1", Resource: "machinedeployments"}).
		List(ctx, metav1.ListOptions{Limit: 100})
	if err != nil {
		return 0
	}
	var what []string
	for _, p := range perr.Problems {
		what = append(what, p.What)
	}
	msg := "operating-system-manager cannot start, so nothing renders: " + strings.Join(what, "; ")
	const tail = ". Apply OSM's CRDs and RBAC (kubectl apply -k deploy/); see docs/migration.md"
	if len(msg)+len(tail) > 1024 {
		msg = msg[:1024-len(tail)-4] + " ..."
	}
	msg += tail
	now := metav1.Now()
	n := 0
	for _, md := range list.Items {
		if md.GetAnnotations()["k8c.io/operating-system-profile"] == "" {
			continue
		}
		ev := &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: md.GetName() + ".osm-", Namespace: md.GetNamespace()},
			InvolvedObject: corev1.ObjectReference{APIVersion: "cluster.k8s.io/v1alpha1", Kind: "MachineDeployment",
				Namespace: md.GetNamespace(), Name: md.GetName(), UID: md.GetUID(), ResourceVersion: md.GetResourceVersion()},
			Reason: PreflightEventReason, Message: msg, Type: corev1.EventTypeWarning,
			Source:         corev1.EventSource{Component: "operating-system-manager"},
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
		if _, err := core.Events(md.GetNamespace()).Create(ctx, ev, metav1.CreateOptions{}); err == nil {
			n++
		}
	}
	return n
}
