package app

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper counts the questions that reach the mapper under the memo.
type countingMapper struct {
	meta.RESTMapper
	asked int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked++
	return c.RESTMapper.RESTMapping(gk, versions...)
}

// TestTheMapperRemembersOnlyWhatItFound: a found mapping is answered from memory, as a copy of its own; a
// kind not found is asked again, so a CRD installed later is still found.
func TestTheMapperRemembersOnlyWhatItFound(t *testing.T) {
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	inner := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	inner.Add(secret, meta.RESTScopeNamespace)
	counting := &countingMapper{RESTMapper: inner}
	m := &memoMapper{RESTMapper: counting}

	first, err := m.RESTMapping(secret.GroupKind())
	if err != nil {
		t.Fatal(err)
	}
	first.Scope = meta.RESTScopeRoot // a caller changing its copy changes nothing for the others
	for range 3 {
		got, err := m.RESTMapping(secret.GroupKind())
		if err != nil {
			t.Fatal(err)
		}
		if got.Scope.Name() != meta.RESTScopeNameNamespace || got.Resource.Resource != "secrets" {
			t.Errorf("mapping = %+v, want the namespaced secrets", got)
		}
	}
	if counting.asked != 1 {
		t.Errorf("the mapper under the memo was asked %d times for one kind, want 1", counting.asked)
	}
	if _, err := m.RESTMapping(secret.GroupKind(), "v2"); err == nil {
		t.Error("a version the mapper does not know was mapped")
	}

	missing := schema.GroupKind{Group: "osm.k8c.io", Kind: "Later"}
	for range 2 {
		if _, err := m.RESTMapping(missing, "v1alpha1"); !meta.IsNoMatchError(err) {
			t.Fatalf("unknown kind: err = %v, want no match", err)
		}
	}
	inner.Add(missing.WithVersion("v1alpha1"), meta.RESTScopeNamespace)
	if _, err := m.RESTMapping(missing, "v1alpha1"); err != nil {
		t.Errorf("a kind added after two misses: %v", err)
	}
	if counting.asked != 5 {
		t.Errorf("asked %d times, want 5 (one found, one unknown version, two misses, one found later)", counting.asked)
	}
}
