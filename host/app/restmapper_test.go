package app

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper knows the kinds in known and counts the RESTMapping calls that reach it.
type countingMapper struct {
	meta.RESTMapper
	known map[schema.GroupKind]meta.RESTScope
	calls int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.calls++
	scope, ok := c.known[gk]
	if !ok {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	return &meta.RESTMapping{GroupVersionKind: gk.WithVersion(versions[0]), Scope: scope,
		Resource: schema.GroupVersionResource{Group: gk.Group, Version: versions[0], Resource: "things"}}, nil
}

func TestRememberingMapperAsksOncePerFoundMapping(t *testing.T) {
	secret := schema.GroupKind{Kind: "Secret"}
	md := schema.GroupKind{Group: "cluster.k8s.io", Kind: "MachineDeployment"}
	inner := &countingMapper{known: map[schema.GroupKind]meta.RESTScope{secret: meta.RESTScopeNamespace}}
	m := &rememberingMapper{RESTMapper: inner, found: map[mappingKey]meta.RESTMapping{}}

	for range 3 {
		got, err := m.RESTMapping(secret, "v1")
		if err != nil || got.Scope.Name() != meta.RESTScopeNameNamespace || got.GroupVersionKind.Version != "v1" {
			t.Fatalf("RESTMapping(Secret, v1) = %+v, %v", got, err)
		}
	}
	if inner.calls != 1 {
		t.Fatalf("three lookups of one mapping reached the dynamic mapper %d times, want 1", inner.calls)
	}

	// Another version is another question.
	if _, err := m.RESTMapping(secret, "v2"); err != nil || inner.calls != 2 {
		t.Fatalf("RESTMapping(Secret, v2): %v after %d calls, want a second call", err, inner.calls)
	}

	// A kind not served yet is not remembered as missing: once its CRD is installed, it is found.
	if _, err := m.RESTMapping(md, "v1alpha1"); !meta.IsNoMatchError(err) {
		t.Fatalf("RESTMapping of an unknown kind: %v, want a no-match error", err)
	}
	inner.known[md] = meta.RESTScopeNamespace
	if _, err := m.RESTMapping(md, "v1alpha1"); err != nil {
		t.Fatalf("RESTMapping after the kind was installed: %v", err)
	}

	// A caller that changes its mapping changes no other caller's.
	first, _ := m.RESTMapping(secret, "v1")
	first.Scope = meta.RESTScopeRoot
	if again, _ := m.RESTMapping(secret, "v1"); again.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Fatalf("a caller's change to its mapping reached the next caller: scope %q", again.Scope.Name())
	}
}
