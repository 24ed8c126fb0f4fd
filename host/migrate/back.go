// Package migrate prepares a cluster OSM ran for upstream OSM v1.11.2 again (`osmctl migrate back`): what
// upstream needs that OSM revoked is restored, what OSM wrote that upstream would keep handing to new machines
// or never clean up is removed, and what upstream cannot render as OSM did is reported.
//
// Upstream never overwrites an existing user-data Secret (it writes one only when none is there), reads the
// shared getter token for every render, and ignores OSM's additions to profiles (spec.plugin, extensions).
// So: the getter ServiceAccount, token Secret, Role and RoleBinding are put back as upstream's
// deploy/cloud-init-settings.yaml has them; OSM's user-data Secrets, kubelet bootstrap Secrets and
// OperatingSystemConfigs go, and with them the node reports (OperatingSystemNodeReports), OSM's per-MachineDeployment bootstrap tokens and reader Roles and
// RoleBindings (nothing renews those tokens once OSM is gone) and OSM's default profiles (upstream installs
// its own at start, and would otherwise render OSM's first and never again); profiles that render through a plugin and that
// upstream does not replace with its own are listed, with the MachineDeployments that name them.
package migrate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
)

// Names upstream OSM v1.11.2 uses (its deploy/cloud-init-settings.yaml and pkg/bootstrap).
const (
	GetterName        = "cloud-init-getter"
	GetterTokenSecret = "cloud-init-getter-token"
	// labelDefaultProfile marks OSM's default profiles (host/controllers/osp.LabelDefault).
	labelDefaultProfile = "osm.k8c.io/default-profile"
)

// upstreamDefaults are the default profiles upstream v1.11.2 installs and rewrites whenever their version
// differs from its own, so OSM's versions of them go back to upstream's on their own.
var upstreamDefaults = map[string]bool{
	"osp-amzn2": true, "osp-flatcar": true, "osp-flatcar-cloud-init": true, "osp-rhel": true, "osp-rockylinux": true, "osp-ubuntu": true,
}

// Options say where upstream and OSM keep their objects.
type Options struct {
	// Namespace is the controllers' -namespace (default profiles, OSCs).
	Namespace string
	// UserDataNamespace holds the user-data Secrets and the getter (cloud-init-settings).
	UserDataNamespace string
	// TokenWait is how long Apply waits for the token controller to fill a getter token Secret it created.
	TokenWait time.Duration
	// UpstreamDisablesDefaults says upstream will run with -disable-default-osps: then OSM's default profiles
	// are not replaced by upstream's either, and are reported like any other profile that needs a plugin.
	UpstreamDisablesDefaults bool
}

// Action is one change Apply makes.
type Action struct {
	Verb   string // create, delete
	Object client.Object
	Why    string
}

func (a Action) String() string {
	return fmt.Sprintf("%s %s %s: %s", a.Verb, kindOf(a.Object), key(a.Object), a.Why)
}

// Warning is something upstream will do differently that no change here can fix.
type Warning struct {
	Subject string
	Message string
}

func (w Warning) String() string { return w.Subject + ": " + w.Message }

// Plan is what going back takes, computed from the cluster as it is.
type Plan struct {
	Actions  []Action
	Warnings []Warning
	// Blocking says a warning concerns a MachineDeployment: upstream would render it near-empty.
	Blocking bool
	opts     Options
}

// NewPlan reads the cluster and returns what going back takes. It changes nothing.
func NewPlan(ctx context.Context, c client.Client, opts Options) (*Plan, error) {
	if opts.Namespace == "" {
		opts.Namespace = metav1.NamespaceSystem
	}
	if opts.UserDataNamespace == "" {
		opts.UserDataNamespace = "cloud-init-settings"
	}
	p := &Plan{opts: opts}
	if err := p.getter(ctx, c); err != nil {
		return nil, err
	}
	if err := p.osmObjects(ctx, c); err != nil {
		return nil, err
	}
	if err := p.profiles(ctx, c); err != nil {
		return nil, err
	}
	return p, nil
}

// getter plans upstream's getter objects back, each that is missing, as deploy/cloud-init-settings.yaml has them.
func (p *Plan) getter(ctx context.Context, c client.Client) error {
	ns := p.opts.UserDataNamespace
	why := "upstream reads this token for every render and fails every MachineDeployment without it"
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: GetterName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: GetterTokenSecret,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: GetterName}}, Type: corev1.SecretTypeServiceAccountToken},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: GetterName},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: GetterName},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: GetterName},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: GetterName, Namespace: ns}}},
	} {
		cur := o.DeepCopyObject().(client.Object)
		err := c.Get(ctx, client.ObjectKeyFromObject(o), cur)
		switch {
		case apierrors.IsNotFound(err):
			p.Actions = append(p.Actions, Action{Verb: "create", Object: o, Why: why})
		case err != nil:
			return fmt.Errorf("reading %s %s: %w", kindOf(o), key(o), err)
		}
	}
	return nil
}

// osmObjects plans the removal of everything OSM created for MachineDeployments: it all carries OSM's
// MachineDeployment label (credentials.Labels), whichever MachineDeployment it was for, including ones gone.
func (p *Plan) osmObjects(ctx context.Context, c client.Client) error {
	marked := client.HasLabels{credentials.LabelMachineDeployment}
	for _, l := range []struct {
		list client.ObjectList
		ns   string
		why  func(client.Object) string
	}{
		{&corev1.SecretList{}, p.opts.UserDataNamespace, func(o client.Object) string {
			if strings.HasSuffix(o.GetName(), "-bootstrap-config") && !strings.Contains(o.GetName(), "kubelet-bootstrap-config") ||
				strings.HasSuffix(o.GetName(), "-provisioning-config") {
				return "OSM's user-data; upstream never overwrites an existing Secret, so it writes its own only once this one is gone"
			}
			return "OSM's kubelet bootstrap kubeconfig; upstream does not use it"
		}},
		{&osmv1alpha1.OperatingSystemConfigList{}, p.opts.Namespace, func(client.Object) string {
			return "OSM's OperatingSystemConfig; upstream writes its own, named <md>-<ns>-config"
		}},
		{&corev1.SecretList{}, metav1.NamespaceSystem, func(client.Object) string {
			return "OSM's bootstrap token for one MachineDeployment; nothing renews it once OSM is gone"
		}},
		{&osmv1alpha1.OperatingSystemNodeReportList{}, p.opts.UserDataNamespace, func(client.Object) string {
			return "OSM's bootstrap reports of one MachineDeployment's machines; upstream has none"
		}},
		{&rbacv1.RoleBindingList{}, p.opts.UserDataNamespace, func(client.Object) string {
			return "lets OSM's bootstrap token read its MachineDeployment's provisioning Secret"
		}},
		{&rbacv1.RoleList{}, p.opts.UserDataNamespace, func(client.Object) string {
			return "OSM's provisioning reader Role"
		}},
		{&corev1.ServiceAccountList{}, p.opts.UserDataNamespace, func(client.Object) string {
			return "a node credential of an earlier OSM version"
		}},
	} {
		if err := c.List(ctx, l.list, client.InNamespace(l.ns), marked); err != nil {
			return fmt.Errorf("listing OSM's %T in %s: %w", l.list, l.ns, err)
		}
		objs, err := items(l.list)
		if err != nil {
			return err
		}
		for _, o := range objs {
			p.Actions = append(p.Actions, Action{Verb: "delete", Object: o, Why: l.why(o)})
		}
	}
	return nil
}

// profiles warns about every profile upstream would render differently from OSM: one that renders through a
// plugin (upstream renders only its templates, without error, often to a near-empty configuration), unless it
// is an OSM default profile upstream replaces with its own; and every OperatingSystemProfileExtension (upstream
// ignores them). A warning about a profile a MachineDeployment names makes the plan Blocking.
func (p *Plan) profiles(ctx context.Context, c client.Client) error {
	mds := &clusterv1alpha1.MachineDeploymentList{}
	if err := c.List(ctx, mds); err != nil {
		return fmt.Errorf("listing MachineDeployments: %w", err)
	}
	users := map[string][]string{}
	for _, md := range mds.Items {
		if md.Annotations[clusterv1alpha1.AnnotationOSP] == "" {
			continue
		}
		ns, name := render.ProfileKey(&md, p.opts.Namespace)
		users[ns+"/"+name] = append(users[ns+"/"+name], md.Namespace+"/"+md.Name)
	}
	osps := &osmv1alpha1.OperatingSystemProfileList{}
	if err := c.List(ctx, osps); err != nil {
		return fmt.Errorf("listing OperatingSystemProfiles: %w", err)
	}
	for _, osp := range osps.Items {
		if osp.Spec.Plugin == nil && len(osp.Spec.Plugins) == 0 {
			continue
		}
		k := osp.Namespace + "/" + osp.Name
		osmDefault := osp.Labels[labelDefaultProfile] == "true" && osp.Namespace == p.opts.Namespace
		if osmDefault && upstreamDefaults[osp.Name] && !p.opts.UpstreamDisablesDefaults {
			// Upstream would rewrite it to its own v1.11.2 at start, but its OSC controller starts at the same
			// time and renders OSM's v2 profile first (templates only), and it never renders again for a
			// profile change. Gone, upstream installs its own, and the MachineDeployments naming it wait for it.
			p.Actions = append(p.Actions, Action{Verb: "delete", Object: osp.DeepCopy(),
				Why: "OSM's default profile; upstream installs its own v1.11.2 under this name at start"})
			continue
		}
		if osmDefault && len(users[k]) == 0 {
			p.Actions = append(p.Actions, Action{Verb: "delete", Object: osp.DeepCopy(),
				Why: "OSM's default profile, which upstream does not ship and no MachineDeployment names"})
			continue
		}
		msg := "renders through a plugin; upstream v1.11.2 ignores spec.plugin and renders only the templates, without an error"
		if u := users[k]; len(u) > 0 {
			sort.Strings(u)
			msg += ", for MachineDeployments " + strings.Join(u, ", ")
			p.Blocking = true
		} else {
			msg += " (no MachineDeployment names it)"
		}
		p.Warnings = append(p.Warnings, Warning{Subject: "OperatingSystemProfile " + k, Message: msg})
	}
	xs := &osmv1alpha1.OperatingSystemProfileExtensionList{}
	if err := c.List(ctx, xs); err != nil && !apierrors.IsNotFound(err) && !isNoKind(err) {
		return fmt.Errorf("listing OperatingSystemProfileExtensions: %w", err)
	}
	for _, x := range xs.Items {
		p.Warnings = append(p.Warnings, Warning{Subject: "OperatingSystemProfileExtension " + x.Namespace + "/" + x.Name,
			Message: "upstream v1.11.2 has no extensions; what it adds to profiles is not rendered"})
	}
	return nil
}

// Apply makes the plan's changes: the getter first (upstream needs it before its first render), then the
// removals. It waits up to TokenWait for kube-controller-manager's token controller to fill a getter token
// Secret it created, and says so when it was not filled.
func (p *Plan) Apply(ctx context.Context, c client.Client, log func(string)) error {
	createdToken := false
	for _, a := range p.Actions {
		var err error
		switch a.Verb {
		case "create":
			err = client.IgnoreAlreadyExists(c.Create(ctx, a.Object))
			if s, ok := a.Object.(*corev1.Secret); ok && s.Name == GetterTokenSecret {
				createdToken = true
			}
		case "delete":
			uid := a.Object.GetUID()
			err = client.IgnoreNotFound(c.Delete(ctx, a.Object, client.Preconditions{UID: &uid}))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		log(a.String())
	}
	if !createdToken {
		return nil
	}
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: p.opts.UserDataNamespace, Name: GetterTokenSecret}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, p.opts.TokenWait, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, s); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return len(s.Data[corev1.ServiceAccountTokenKey]) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("the getter token Secret %s was created but holds no token after %s: kube-controller-manager's token controller fills it; upstream fails every MachineDeployment until it does", key, p.opts.TokenWait)
	}
	log(fmt.Sprintf("Secret %s holds a token", key))
	return nil
}

// items returns a list's items as objects.
func items(l client.ObjectList) ([]client.Object, error) {
	objs, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		co, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%T holds a %T, which is not an API object", l, o)
		}
		out = append(out, co)
	}
	return out, nil
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *corev1.Secret:
		return "Secret"
	case *corev1.ServiceAccount:
		return "ServiceAccount"
	case *rbacv1.Role:
		return "Role"
	case *rbacv1.RoleBinding:
		return "RoleBinding"
	case *osmv1alpha1.OperatingSystemConfig:
		return "OperatingSystemConfig"
	case *osmv1alpha1.OperatingSystemProfile:
		return "OperatingSystemProfile"
	case *osmv1alpha1.OperatingSystemNodeReport:
		return "OperatingSystemNodeReport"
	}
	return fmt.Sprintf("%T", o)
}

func key(o client.Object) string { return o.GetNamespace() + "/" + o.GetName() }

func isNoKind(err error) bool { return meta.IsNoMatchError(err) }
