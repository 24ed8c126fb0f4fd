package credentials

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/render"
)

// Token is a credential and when it stops working.
type Token struct {
	Value   string
	Expires time.Time
}

// Valid reports whether the token still has at least margin left at now.
func (t Token) Valid(now time.Time, margin time.Duration) bool {
	return t.Value != "" && t.Expires.After(now.Add(margin))
}

// User is the name the API server authenticates a bootstrap token ("<id>.<secret>") as.
func (t Token) User() string {
	id, _, _ := strings.Cut(t.Value, ".")
	return "system:bootstrap:" + id
}

// Issuer creates and refreshes node credentials in the worker cluster.
type Issuer struct {
	// Client writes to the worker cluster; its reads may come from a cache.
	Client client.Client
	// APIReader reads past the cache where a stale read would duplicate a credential; Client when nil.
	APIReader client.Reader
	// Namespace holds the user-data Secrets and the provisioning Roles ("cloud-init-settings").
	Namespace string
	// BootstrapTokenTTL is how long a bootstrap token stays valid after each refresh.
	BootstrapTokenTTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// NoNodeReports leaves the report rule out of the reader Role (-node-reports=false).
	NoNodeReports bool
}

// DefaultBootstrapTokenTTL is the bootstrap token's lifetime. The token is extended in place when a third of it
// is left, which changes nothing nodes see.
const DefaultBootstrapTokenTTL = 24 * time.Hour

func (i *Issuer) now() time.Time {
	if i.Now != nil {
		return i.Now()
	}
	return time.Now()
}

// ProvisioningReaderName is the Role and RoleBinding that let md's nodes read their provisioning Secrets.
func ProvisioningReaderName(md *clusterv1alpha1.MachineDeployment) string {
	return render.ObjectName(md, "provisioning-reader")
}

// RefreshMargin is how much validity a reused token must have left: a third of its lifetime.
func RefreshMargin(ttl time.Duration) time.Duration { return ttl / 3 }

// EnsureReaderRole creates the Role granting get on exactly md's provisioning Secret and kubelet bootstrap
// Secret and, unless node reports are off, patch on exactly the status of md's OperatingSystemNodeReport
// (ReporterRule). It binds nobody: BindReader does, once the token it is bound to is known. A Role that exists
// already is used only if it is marked as md's, and its rules are brought in line (a Role of an OSM version
// before node reports gains the report rule).
func (i *Issuer) EnsureReaderRole(ctx context.Context, md *clusterv1alpha1.MachineDeployment) error {
	role := i.readerRole(md)
	return i.create(ctx, role, func() error { return i.alignRules(ctx, md, role) })
}

// AnnotationRules is on a reader Role: a digest of the rules OSM gave it, so that AlignReaderRole tells from
// the cached metadata that they are current instead of reading the Role (once per new MachineDeployment).
const AnnotationRules = "osm.k8c.io/rules"

// readerRole is md's reader Role as OSM creates it.
func (i *Issuer) readerRole(md *clusterv1alpha1.MachineDeployment) *rbacv1.Role {
	role := &rbacv1.Role{ObjectMeta: i.readerMeta(md), Rules: i.readerRules(md)}
	role.Annotations[AnnotationRules] = rulesDigest(role.Rules)
	return role
}

func rulesDigest(rules []rbacv1.PolicyRule) string {
	b, _ := json.Marshal(rules) // rules of plain strings always marshal
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// AlignReaderRole brings the rules of md's existing reader Role in line (a Role of an OSM version before node
// reports lacks ReporterRule) and leaves a missing Role to EnsureReaderRole, which the OSC controller calls:
// it never tries to create one, so a new MachineDeployment's Role is created once, not raced for.
func (i *Issuer) AlignReaderRole(ctx context.Context, md *clusterv1alpha1.MachineDeployment) error {
	want := i.readerRole(md)
	cached := ReaderRoleMeta()
	if err := i.Client.Get(ctx, client.ObjectKeyFromObject(want), cached); err == nil && Marked(md, cached) &&
		cached.Annotations[AnnotationRules] == want.Annotations[AnnotationRules] {
		return nil
	}
	err := i.alignRules(ctx, md, want)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// alignRules gives md's existing Role of want's name want's rules; it must be md's (owned).
func (i *Issuer) alignRules(ctx context.Context, md *clusterv1alpha1.MachineDeployment, want *rbacv1.Role) error {
	obj, err := i.owned(ctx, md, want)
	if err != nil {
		return err
	}
	have := obj.(*rbacv1.Role)
	if reflect.DeepEqual(have.Rules, want.Rules) {
		return nil
	}
	have.Rules = want.Rules
	if have.Annotations == nil {
		have.Annotations = map[string]string{}
	}
	have.Annotations[AnnotationRules] = want.Annotations[AnnotationRules]
	return i.Client.Update(ctx, have)
}

func (i *Issuer) readerRules(md *clusterv1alpha1.MachineDeployment) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{{
		APIGroups:     []string{""},
		Resources:     []string{"secrets"},
		Verbs:         []string{"get"},
		ResourceNames: []string{render.ProvisioningSecretName(md), render.KubeletBootstrapSecretName(md)},
	}}
	if !i.NoNodeReports {
		rules = append(rules, ReporterRule(md))
	}
	return rules
}

// ReporterRule lets md's node credential write its machines' bootstrap reports: get and patch on the status of
// exactly md's OperatingSystemNodeReport, which has the provisioning Secret's name. Not create (RBAC cannot
// scope create by name, so the controller creates the object), not the object itself (its metadata), and no
// other MachineDeployment's report.
func ReporterRule(md *clusterv1alpha1.MachineDeployment) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{
		APIGroups:     []string{"operatingsystemmanager.k8c.io"},
		Resources:     []string{"operatingsystemnodereports/status"},
		Verbs:         []string{"get", "patch"},
		ResourceNames: []string{render.ProvisioningSecretName(md)},
	}
}

// BindReader binds md's reader Role to the user of tok, md's bootstrap token: one credential serves the node's
// provisioning fetch and its kubelet's TLS bootstrap, and it lives as long as the MachineDeployment (see
// BootstrapToken). The Role must exist (the API server checks what a binding grants against its creator's
// rights). A binding of md's that names another user (a token issued before, or a ServiceAccount of an OSM
// version that issued those) is pointed at tok's user, which revokes the old one's access.
func (i *Issuer) BindReader(ctx context.Context, md *clusterv1alpha1.MachineDeployment, tok Token) error {
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tok.User()}}
	rb := &rbacv1.RoleBinding{ObjectMeta: i.readerMeta(md),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ProvisioningReaderName(md)},
		Subjects: subjects,
	}
	return i.create(ctx, rb, func() error { return i.rebind(ctx, md, rb) })
}

// rebind points md's existing RoleBinding at want's subjects.
func (i *Issuer) rebind(ctx context.Context, md *clusterv1alpha1.MachineDeployment, want *rbacv1.RoleBinding) error {
	obj, err := i.owned(ctx, md, want)
	if err != nil {
		return err
	}
	have := obj.(*rbacv1.RoleBinding)
	if len(have.Subjects) == 1 && have.Subjects[0] == want.Subjects[0] {
		return nil
	}
	have.Subjects = want.Subjects
	return i.Client.Update(ctx, have)
}

// create creates obj; when it exists already, existing decides whether it is used (and brings it in line).
func (i *Issuer) create(ctx context.Context, obj client.Object, existing func() error) error {
	err := i.Client.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		err = existing()
	}
	if err != nil {
		return fmt.Errorf("creating %s %s/%s: %w", reflect.TypeOf(obj).Elem().Name(), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func (i *Issuer) readerMeta(md *clusterv1alpha1.MachineDeployment) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: i.Namespace, Name: ProvisioningReaderName(md), Labels: Labels(md), Annotations: Annotations(md)}
}

// owned reads the object that exists under obj's name (the name OSM chose for md) and returns it, refusing it
// unless it is marked as md's.
func (i *Issuer) owned(ctx context.Context, md *clusterv1alpha1.MachineDeployment, obj client.Object) (client.Object, error) {
	existing := obj.DeepCopyObject().(client.Object)
	if err := i.reader().Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		return nil, err
	}
	if !Marked(md, existing) {
		return nil, &ConflictError{Kind: fmt.Sprintf("%T", obj), Name: obj.GetNamespace() + "/" + obj.GetName(), Owner: Owner(existing)}
	}
	return existing, nil
}

// ReaderRoleMeta and ReaderBindingMeta are the metadata-only forms of the reader Role and RoleBinding, as the
// controller watches and caches them: enough to notice one is gone, a few hundred bytes each.
func ReaderRoleMeta() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"}}
}

// ReaderBindingMeta is ReaderRoleMeta for the RoleBinding.
func ReaderBindingMeta() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"}}
}

// ReaderMissing reports, from c (the controller's cache), whether md's reader Role or RoleBinding is gone.
// Errors other than NotFound count as present: the write path finds out for sure.
func (i *Issuer) ReaderMissing(ctx context.Context, c client.Reader, md *clusterv1alpha1.MachineDeployment) (role, binding bool) {
	key := client.ObjectKey{Namespace: i.Namespace, Name: ProvisioningReaderName(md)}
	role = apierrors.IsNotFound(c.Get(ctx, key, ReaderRoleMeta()))
	binding = apierrors.IsNotFound(c.Get(ctx, key, ReaderBindingMeta()))
	return role, binding
}

// ConflictError says an object OSM needs for a MachineDeployment exists and is not that MachineDeployment's.
type ConflictError struct {
	Kind, Name string
	// Owner is the "<namespace>/<name>" of the MachineDeployment the object belongs to; empty when it is not
	// OSM's.
	Owner string
}

func (e *ConflictError) Error() string {
	owner := "was not created by OSM"
	if e.Owner != "" {
		owner = "belongs to MachineDeployment " + e.Owner
	}
	return fmt.Sprintf("%s %s %s; it is neither reused nor overwritten", strings.TrimPrefix(e.Kind, "*"), e.Name, owner)
}
