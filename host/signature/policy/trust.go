package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Trust is one rule of a policy with everything verifying under it needs: the authorities it names and the
// data of the ConfigMaps and Secrets they name (public material: keys, trusted roots, CA certificates). It
// is what the controller hands the verifier process, which reads nothing else.
type Trust struct {
	// Policy names the policy in refusals: "namespace/name" of its ConfigMap.
	Policy string `json:"policy"`
	Rule   Rule   `json:"rule"`
	// Authorities are the rule's, in its order.
	Authorities []Authority `json:"authorities"`
	// Material holds the data of each KeyRef the authorities name: that key alone when the KeyRef names one.
	Material []Material `json:"material"`
	// Key identifies all of the above: a module verified under one Key is not served to a reference under
	// another, so editing the policy or rotating a key verifies again.
	Key string `json:"key"`
}

// Material is the data of one object a KeyRef names.
type Material struct {
	Ref  KeyRef            `json:"ref"`
	Data map[string][]byte `json:"data"`
}

// Getter returns the data of the object a KeyRef names.
type Getter func(KeyRef) (map[string][]byte, error)

// NewTrust reads the material of rule's authorities (of p) through get.
func NewTrust(name string, p *Policy, rule Rule, get Getter) (*Trust, error) {
	t := &Trust{Policy: name, Rule: rule}
	for _, an := range rule.Authorities {
		a := p.Authority(an)
		if a == nil {
			return nil, fmt.Errorf("authority %q is not defined", an)
		}
		t.Authorities = append(t.Authorities, *a)
		for _, r := range a.refs() {
			data, err := get(r)
			if err != nil {
				return nil, err
			}
			if r.Key != "" {
				data = map[string][]byte{r.Key: data[r.Key]}
			}
			t.Material = append(t.Material, Material{Ref: r, Data: data})
		}
	}
	// Maps marshal in key order: the same trust has the same Key.
	raw, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	t.Key = hex.EncodeToString(sum[:])
	return t, nil
}

// Get is a Getter over the trust's material alone.
func (t *Trust) Get(r KeyRef) (map[string][]byte, error) {
	for _, m := range t.Material {
		if m.Ref == r {
			return m.Data, nil
		}
	}
	return nil, fmt.Errorf("%s: not among the material of the rule %q", r, t.Rule.Name)
}

// AuthoritiesPolicy is a policy of the trust's authorities alone.
func (t *Trust) AuthoritiesPolicy() *Policy { return &Policy{Authorities: t.Authorities} }

// refs are the objects a's trust material is read from.
func (a *Authority) refs() []KeyRef {
	switch {
	case a.Keys != nil:
		return []KeyRef{*a.Keys}
	case a.Keyless != nil:
		return []KeyRef{a.Keyless.TrustedRoot}
	case a.Notation != nil:
		return []KeyRef{a.Notation.TrustStore}
	}
	return nil
}
