package credentials

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/render"
)

// Bootstrap token conventions (k8s.io/cluster-bootstrap), restated to keep the dependency out.
const (
	bootstrapTokenNamespace = "kube-system"
	bootstrapTokenType      = corev1.SecretType("bootstrap.kubernetes.io/token")
	// NodeBootstrapGroup is the extra group bootstrap tokens carry, as upstream OSM and machine-controller
	// issue them; clusters bind CSR creation and auto-approval to it.
	NodeBootstrapGroup = "system:bootstrappers:machine-controller:default-node-token"
)

// BootstrapToken returns md's kubelet bootstrap token ("<id>.<secret>"), creating it on first use and pushing its
// expiration forward when less than a third of its lifetime is left. The token value never changes while the
// MachineDeployment exists, so refreshing it does not change any user-data.
//
// The token id is derived from the MachineDeployment's UID, so the Secret has a name known in advance: a
// controller restarted between creating the token and using it finds it again instead of issuing a second one.
func (i *Issuer) BootstrapToken(ctx context.Context, md *clusterv1alpha1.MachineDeployment) (Token, error) {
	ttl := i.BootstrapTokenTTL
	if ttl == 0 {
		ttl = DefaultBootstrapTokenTTL
	}
	now := i.now()
	key := client.ObjectKey{Namespace: bootstrapTokenNamespace, Name: "bootstrap-token-" + bootstrapTokenID(md)}
	s := &corev1.Secret{}
	err := i.Client.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		tok, createErr := i.createBootstrapToken(ctx, md, key, now.Add(ttl).UTC().Truncate(time.Second))
		if !apierrors.IsAlreadyExists(createErr) {
			return tok, createErr
		}
		// The cache had not seen our own earlier create yet; read past it.
		err = i.reader().Get(ctx, key, s)
	}
	if err != nil {
		return Token{}, fmt.Errorf("reading bootstrap token %s: %w", key.Name, err)
	}
	if s.Labels[LabelMDName] != Labels(md)[LabelMDName] || s.Labels[LabelMDNamespace] != Labels(md)[LabelMDNamespace] {
		return Token{}, fmt.Errorf("bootstrap token %s belongs to another MachineDeployment (%s/%s)", key.Name, s.Labels[LabelMDNamespace], s.Labels[LabelMDName])
	}
	tok := Token{Value: string(s.Data["token-id"]) + "." + string(s.Data["token-secret"])}
	if exp, err := time.Parse(time.RFC3339, string(s.Data["expiration"])); err == nil {
		tok.Expires = exp
	}
	if tok.Valid(now, RefreshMargin(ttl)) {
		return tok, nil
	}
	tok.Expires = now.Add(ttl).UTC().Truncate(time.Second)
	patch := client.MergeFrom(s.DeepCopy())
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data["expiration"] = []byte(tok.Expires.Format(time.RFC3339))
	if err := i.Client.Patch(ctx, s, patch); err != nil {
		return Token{}, fmt.Errorf("extending bootstrap token %s: %w", s.Name, err)
	}
	return tok, nil
}

// bootstrapTokenID derives the public half of md's bootstrap token from its UID.
func bootstrapTokenID(md *clusterv1alpha1.MachineDeployment) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	sum := sha256.Sum256([]byte("osm-bootstrap-token/" + string(md.UID)))
	id := make([]byte, 6)
	for i := range id {
		id[i] = alphabet[int(sum[i])%len(alphabet)]
	}
	return string(id)
}

func (i *Issuer) reader() client.Reader {
	if i.APIReader != nil {
		return i.APIReader
	}
	return i.Client
}

func (i *Issuer) createBootstrapToken(ctx context.Context, md *clusterv1alpha1.MachineDeployment, key client.ObjectKey, expires time.Time) (Token, error) {
	secret, err := randomToken(16)
	if err != nil {
		return Token{}, err
	}
	id := key.Name[len("bootstrap-token-"):]
	labels := Labels(md)
	labels[LabelUpstreamMDKey] = truncate(render.MachineDeploymentKey(md))
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: labels},
		Type:       bootstrapTokenType,
		Data: map[string][]byte{
			"description":                    fmt.Appendf(nil, "OSM bootstrap token for MachineDeployment %s/%s", md.Namespace, md.Name),
			"token-id":                       []byte(id),
			"token-secret":                   []byte(secret),
			"expiration":                     []byte(expires.Format(time.RFC3339)),
			"usage-bootstrap-authentication": []byte("true"),
			"usage-bootstrap-signing":        []byte("true"),
			"auth-extra-groups":              []byte(NodeBootstrapGroup),
		},
	}
	if err := i.Client.Create(ctx, s); err != nil {
		return Token{}, err
	}
	return Token{Value: id + "." + secret, Expires: expires}, nil
}

// randomToken returns n characters of [a-z0-9], the bootstrap token alphabet.
func randomToken(n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	for i, b := range buf {
		buf[i] = alphabet[int(b)%len(alphabet)]
	}
	return string(buf), nil
}
