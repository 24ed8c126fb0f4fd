package credentials

import (
	"context"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/internal/parallel"
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

// Issuer creates and refreshes node credentials in the worker cluster.
type Issuer struct {
	// Client writes to the worker cluster; its reads may come from a cache.
	Client client.Client
	// APIReader reads past the cache where a stale read would duplicate a credential; Client when nil.
	APIReader client.Reader
	// Namespace holds the user-data Secrets and the provisioning ServiceAccounts ("cloud-init-settings").
	Namespace string
	// ProvisioningTokenTTL is the lifetime asked for provisioning tokens; the API server may cap it.
	ProvisioningTokenTTL time.Duration
	// BootstrapTokenTTL is how long a bootstrap token stays valid after each refresh.
	BootstrapTokenTTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Defaults for the token lifetimes. A provisioning token is rotated after two thirds of its life, which
// rewrites the bootstrap Secret; a bootstrap token is extended in place, which changes nothing nodes see.
const (
	DefaultProvisioningTokenTTL = 30 * 24 * time.Hour
	DefaultBootstrapTokenTTL    = 24 * time.Hour
)

func (i *Issuer) now() time.Time {
	if i.Now != nil {
		return i.Now()
	}
	return time.Now()
}

// ProvisioningReaderName is the ServiceAccount, Role and RoleBinding that let md's nodes read their
// provisioning Secrets.
func ProvisioningReaderName(md *clusterv1alpha1.MachineDeployment) string {
	return render.ObjectName(md, "provisioning-reader")
}

// RefreshMargin is how much validity a reused token must have left: a third of its lifetime.
func RefreshMargin(ttl time.Duration) time.Duration { return ttl / 3 }

// ProvisioningToken returns a token that may get md's provisioning Secret and kubelet bootstrap Secret, and
// nothing else. current is the token handed out before; it is returned unchanged while it has enough validity
// left, so a reconcile does not rewrite user-data for nothing.
//
// The ServiceAccount and its RBAC are ensured only when a token is issued: a reconcile that reuses a token
// costs no API call here.
func (i *Issuer) ProvisioningToken(ctx context.Context, md *clusterv1alpha1.MachineDeployment, current Token) (Token, error) {
	ttl := i.ProvisioningTokenTTL
	if ttl == 0 {
		ttl = DefaultProvisioningTokenTTL
	}
	if current.Valid(i.now(), RefreshMargin(ttl)) {
		return current, nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: i.Namespace, Name: ProvisioningReaderName(md)}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl.Seconds()))}}
	// The token needs only the ServiceAccount; its RoleBinding is created at the same time. A token whose
	// binding failed is never handed out: the reconcile fails and the next one issues another.
	err := i.ensureReader(ctx, md, func() error {
		if err := i.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
			return fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
		}
		return nil
	})
	if err != nil {
		return Token{}, err
	}
	return Token{Value: tr.Status.Token, Expires: tr.Status.ExpirationTimestamp.Time}, nil
}

// ensureReader creates the ServiceAccount, the Role granting get on exactly md's two provisioning Secrets, and
// the RoleBinding between them. One that exists already is used only if it is marked as md's. The
// ServiceAccount and the Role are created together, then the RoleBinding (the API server checks the Role it
// binds) together with withSA, which needs only the ServiceAccount.
func (i *Issuer) ensureReader(ctx context.Context, md *clusterv1alpha1.MachineDeployment, withSA func() error) error {
	name := ProvisioningReaderName(md)
	meta := metav1.ObjectMeta{Namespace: i.Namespace, Name: name, Labels: Labels(md), Annotations: Annotations(md)}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta, AutomountServiceAccountToken: ptr.To(false)},
		&rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{
			APIGroups:     []string{""},
			Resources:     []string{"secrets"},
			Verbs:         []string{"get"},
			ResourceNames: []string{render.ProvisioningSecretName(md), render.KubeletBootstrapSecretName(md)},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: meta,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: i.Namespace, Name: name}},
		},
	}
	create := func(obj client.Object) func() error {
		return func() error {
			err := i.Client.Create(ctx, obj)
			if apierrors.IsAlreadyExists(err) {
				err = i.checkExisting(ctx, md, obj)
			}
			if err != nil {
				return fmt.Errorf("creating %T %s/%s: %w", obj, i.Namespace, name, err)
			}
			return nil
		}
	}
	if err := parallel.Do(create(objs[0]), create(objs[1])); err != nil {
		return err
	}
	return parallel.Do(create(objs[2]), withSA)
}

// checkExisting reads an object that already exists under the name OSM chose for md, and refuses it unless it
// is marked as md's.
func (i *Issuer) checkExisting(ctx context.Context, md *clusterv1alpha1.MachineDeployment, obj client.Object) error {
	existing := obj.DeepCopyObject().(client.Object)
	if err := i.reader().Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		return err
	}
	if !Marked(md, existing) {
		return &ConflictError{Kind: fmt.Sprintf("%T", obj), Name: obj.GetNamespace() + "/" + obj.GetName(), Owner: Owner(existing)}
	}
	return nil
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
