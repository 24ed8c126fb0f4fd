package signature

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/osmhq/osm/host/signature/policy"
)

// NewVerifier loads the trust material of rule's authorities (of p) through get and returns a verifier of
// that rule; policy names the policy in refusals.
func NewVerifier(name string, p *Policy, rule Rule, get Getter, log logr.Logger) (*Verifier, error) {
	t, err := policy.NewTrust(name, p, rule, get)
	if err != nil {
		return nil, err
	}
	return FromTrust(t, log)
}

// FromTrust loads the trust's material into a verifier of its rule.
func FromTrust(t *policy.Trust, log logr.Logger) (*Verifier, error) {
	v := &Verifier{policy: t.Policy, rule: t.Rule, log: log, timeout: DefaultTimeout, key: t.Key}
	for i := range t.Authorities {
		a, _, err := loadAuthority(&t.Authorities[i], t.Get)
		if err != nil {
			return nil, err
		}
		v.authorities = append(v.authorities, a)
	}
	return v, nil
}

// maxVerifiers bounds the verifiers a PolicySource keeps.
const maxVerifiers = 64

// DefaultReload is how long a PolicySource keeps a policy it read before reading it again.
const DefaultReload = policy.DefaultReload

// PolicySource is a policy.Source whose trust is loaded into verifiers in this process (osmctl, tests); the
// controller loads it into verifier processes instead (verifyproc.Runner).
type PolicySource struct {
	// Reader reads ConfigMaps and Secrets (the manager's API reader: no cache, no watch on Secrets).
	Reader client.Reader
	// Namespace and Name locate the policy ConfigMap; the trust material is in Namespace too.
	Namespace, Name string
	// Reload defaults to DefaultReload.
	Reload time.Duration
	Log    logr.Logger

	once      sync.Once
	src       *policy.Source
	mu        sync.Mutex
	verifiers map[string]*Verifier
}

// Name of the policy in refusals and logs.
func (s *PolicySource) String() string { return s.Namespace + "/" + s.Name }

// For returns the verifier that applies to image in namespace, or nil when no rule (or a rule in mode off)
// applies.
func (s *PolicySource) For(ctx context.Context, namespace, image string) (*Verifier, error) {
	s.once.Do(func() {
		s.src = &policy.Source{Reader: s.Reader, Namespace: s.Namespace, Name: s.Name, Reload: s.Reload}
		s.verifiers = map[string]*Verifier{}
	})
	t, err := s.src.For(ctx, namespace, image)
	if t == nil || err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.verifiers[t.Key]; ok {
		return v, nil
	}
	if len(s.verifiers) >= maxVerifiers {
		clear(s.verifiers) // an edited policy's old trust is no longer asked for
	}
	v, err := FromTrust(t, s.Log)
	if err != nil {
		return nil, err
	}
	s.verifiers[t.Key] = v
	return v, nil
}
