package render

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// TestEveryPlaceholderHasThePrefix guards substituter's shortcut: text without placeholderPrefix is written
// as it is, so a placeholder without it would reach a node unsubstituted.
func TestEveryPlaceholderHasThePrefix(t *testing.T) {
	var all []string
	fixed := reflect.ValueOf(Placeholders)
	for i := range fixed.NumField() {
		if f := fixed.Field(i); f.Kind() == reflect.String {
			all = append(all, f.String())
		}
	}
	reg := reflect.ValueOf(RegistryPlaceholders("registry.example.com:5000"))
	for i := range reg.NumField() {
		all = append(all, reg.Field(i).String())
	}
	all = append(all, PluginSecretPlaceholder("registration-code"))
	if len(all) < 10 {
		t.Fatalf("found %d placeholders, want every field of Placeholders and RegistryPlaceholders", len(all))
	}
	for _, p := range all {
		if !strings.HasPrefix(p, placeholderPrefix) {
			t.Errorf("placeholder %q does not begin with %q", p, placeholderPrefix)
		}
	}
}

// TestSubstitutionKeepsTextWithoutPlaceholders checks both ways of substituter: a placeholder is replaced,
// and text without one is handed back without a copy.
func TestSubstitutionKeepsTextWithoutPlaceholders(t *testing.T) {
	s := SecretValues{BootstrapToken: "abcdef.0123456789abcdef", Plugin: map[string]string{"registration-code": "R-1"}}.replacer()
	in := "token=" + Placeholders.BootstrapToken + " code=" + PluginSecretPlaceholder("registration-code")
	if got, want := s.Replace(in), "token=abcdef.0123456789abcdef code=R-1"; got != want {
		t.Errorf("Replace(%q) = %q, want %q", in, got, want)
	}
	plain := strings.Repeat("no credential here, __OSM_ but not a placeholder\n", 100)
	got := s.Replace(plain)
	if got != plain {
		t.Fatalf("text without a placeholder changed")
	}
	if unsafe.StringData(got) != unsafe.StringData(plain) {
		t.Errorf("text without a placeholder was copied")
	}
}
