package credentials

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
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
// The token is found by md's label. A new token's id is derived from the MachineDeployment's UID, so a
// controller restarted between creating the token and using it finds it again instead of issuing a second
// one; six characters can collide, so an id taken by another token is skipped for the next candidate, and a
// token is only ever used when it is marked as md's.
func (i *Issuer) BootstrapToken(ctx context.Context, md *clusterv1alpha1.MachineDeployment) (Token, error) {
	ttl := i.TokenTTL()
	now := i.now()
	s, created, err := i.bootstrapTokenSecret(ctx, md, now.Add(ttl).UTC().Truncate(time.Second))
	if err != nil || created != nil {
		return derefToken(created), err
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

// TokenTTL is the bootstrap token's lifetime: BootstrapTokenTTL, or DefaultBootstrapTokenTTL when unset.
func (i *Issuer) TokenTTL() time.Duration {
	if i.BootstrapTokenTTL == 0 {
		return DefaultBootstrapTokenTTL
	}
	return i.BootstrapTokenTTL
}

func derefToken(t *Token) Token {
	if t == nil {
		return Token{}
	}
	return *t
}

// bootstrapTokenCandidates is how many ids are tried before giving up; a second collision among 36^6 ids is
// already unlikely.
const bootstrapTokenCandidates = 8

// bootstrapTokenSecret returns md's existing token Secret, or creates one and returns the new token.
func (i *Issuer) bootstrapTokenSecret(ctx context.Context, md *clusterv1alpha1.MachineDeployment, expires time.Time) (*corev1.Secret, *Token, error) {
	list := &corev1.SecretList{}
	if err := i.Client.List(ctx, list, client.InNamespace(bootstrapTokenNamespace), Selector(md)); err != nil {
		return nil, nil, fmt.Errorf("listing bootstrap tokens: %w", err)
	}
	for k := range list.Items {
		if s := &list.Items[k]; s.Type == bootstrapTokenType && Marked(md, s) {
			return s, nil, nil
		}
	}
	for n := range bootstrapTokenCandidates {
		key := client.ObjectKey{Namespace: bootstrapTokenNamespace, Name: "bootstrap-token-" + bootstrapTokenID(md, n)}
		tok, err := i.createBootstrapToken(ctx, md, key, expires)
		if !apierrors.IsAlreadyExists(err) {
			return nil, &tok, err
		}
		// Our own earlier create that the cache has not seen yet, or another token with the same id.
		s := &corev1.Secret{}
		if err := i.reader().Get(ctx, key, s); err != nil {
			return nil, nil, fmt.Errorf("reading bootstrap token %s: %w", key.Name, err)
		}
		if s.Type == bootstrapTokenType && Marked(md, s) {
			return s, nil, nil
		}
	}
	return nil, nil, fmt.Errorf("no free bootstrap token id for MachineDeployment %s: %d candidates are taken", OwnerKey(md), bootstrapTokenCandidates)
}

// bootstrapTokenID derives the n-th candidate for the public half of md's bootstrap token from its UID.
func bootstrapTokenID(md *clusterv1alpha1.MachineDeployment, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	seed := "osm-bootstrap-token/" + string(md.UID)
	if n > 0 {
		seed += "/" + strconv.Itoa(n)
	}
	sum := sha256.Sum256([]byte(seed))
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
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: Labels(md), Annotations: Annotations(md)},
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
