package policy

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultReload is how long a Source keeps a policy it read before reading it again.
const DefaultReload = 10 * time.Second

// Source reads the policy ConfigMap, and the ConfigMaps and Secrets holding its keys, from the cluster:
// all in one namespace, the controller's. It reads them again at most every Reload, so editing the policy or
// rotating a key takes effect within that time without a restart; a module verified under the old material
// is verified again under the new (the Trust's Key changes). A policy that cannot be read or does not
// parse refuses every image a rule might have covered: it fails closed.
type Source struct {
	// Reader reads ConfigMaps and Secrets (the manager's API reader: no cache, no watch on Secrets).
	Reader client.Reader
	// Namespace and Name locate the policy ConfigMap; the trust material is in Namespace too.
	Namespace, Name string
	// Reload defaults to DefaultReload.
	Reload time.Duration

	mu     sync.Mutex
	loaded *loadedPolicy
}

type loadedPolicy struct {
	at     time.Time
	policy *Policy
	err    error
	trusts map[int]*Trust
	errs   map[int]error
}

// Name of the policy in refusals and logs.
func (s *Source) String() string { return s.Namespace + "/" + s.Name }

// For returns the trust of the rule that applies to image in namespace, or nil when no rule (or a rule in
// mode off) applies.
func (s *Source) For(ctx context.Context, namespace, image string) (*Trust, error) {
	lp := s.current(ctx)
	if lp.err != nil {
		return nil, fmt.Errorf("plugin verification policy %s: %w", s, lp.err)
	}
	idx := -1
	rule := lp.policy.RuleFor(namespace, image)
	if rule == nil || rule.Mode == ModeOff {
		return nil, nil
	}
	for i := range lp.policy.Rules {
		if &lp.policy.Rules[i] == rule {
			idx = i
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := lp.trusts[idx]; ok {
		return t, nil
	}
	if err, ok := lp.errs[idx]; ok {
		return nil, err
	}
	t, err := NewTrust(s.String(), lp.policy, *rule, func(r KeyRef) (map[string][]byte, error) { return s.data(ctx, r) })
	if err != nil {
		err = fmt.Errorf("plugin verification policy %s (%s): %w", s, rule.Name, err)
		lp.errs[idx] = err
		return nil, err
	}
	lp.trusts[idx] = t
	return t, nil
}

// current returns the policy read at most Reload ago, reading it again otherwise.
func (s *Source) current(ctx context.Context) *loadedPolicy {
	reload := s.Reload
	if reload <= 0 {
		reload = DefaultReload
	}
	s.mu.Lock()
	lp := s.loaded
	s.mu.Unlock()
	if lp != nil && time.Since(lp.at) < reload {
		return lp
	}
	lp = &loadedPolicy{at: time.Now(), trusts: map[int]*Trust{}, errs: map[int]error{}}
	data, err := s.data(ctx, KeyRef{ConfigMap: s.Name, Key: PolicyKey})
	if err == nil {
		lp.policy, err = ParsePolicy(data[PolicyKey])
	}
	lp.err = err
	s.mu.Lock()
	s.loaded = lp
	s.mu.Unlock()
	return lp
}

// data reads the object r names in the source's namespace.
func (s *Source) data(ctx context.Context, r KeyRef) (map[string][]byte, error) {
	key := client.ObjectKey{Namespace: s.Namespace}
	out := map[string][]byte{}
	if r.Secret != "" {
		key.Name = r.Secret
		sec := &corev1.Secret{}
		if err := s.Reader.Get(ctx, key, sec); err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		out = sec.Data
	} else {
		key.Name = r.ConfigMap
		cm := &corev1.ConfigMap{}
		if err := s.Reader.Get(ctx, key, cm); err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		for k, v := range cm.Data {
			out[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			out[k] = v
		}
	}
	if r.Key != "" {
		if _, ok := out[r.Key]; !ok {
			return nil, fmt.Errorf("%s: no such key", r)
		}
	}
	return out, nil
}
