package signature

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const tenancyPolicy = `
authorities:
- name: operator
  keys: {secret: operator-keys, key: cosign.pub}
- name: vendor
  keys: {configMap: vendor-keys}
rules:
- name: tenants-operator-only
  namespaces: ["tenant-*"]
  authorities: [operator]
- name: vendor-images
  images: ["registry.vendor.test/osm/*"]
  mode: warn
  authorities: [vendor, operator]
- name: lab
  namespaces: [lab]
  mode: off
`

func TestRuleFor(t *testing.T) {
	p, err := ParsePolicy([]byte(tenancyPolicy))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		namespace, image, want string
	}{
		{"tenant-a", "registry.vendor.test/osm/ubuntu@sha256:00", "tenants-operator-only"},
		{"kube-system", "registry.vendor.test/osm/ubuntu@sha256:00", "vendor-images"},
		{"kube-system", "registry.vendor.test/osm/ubuntu:1.0", "vendor-images"},
		{"kube-system", "registry.vendor.test:5000/osm/ubuntu@sha256:00", ""},
		{"kube-system", "registry.vendor.test/osm/sub/ubuntu@sha256:00", ""}, // "*" does not cross "/"
		{"lab", "registry.example.com/x@sha256:00", "lab"},
		{"default", "registry.example.com/x@sha256:00", ""},
	}
	for _, tt := range tests {
		got := ""
		if r := p.RuleFor(tt.namespace, tt.image); r != nil {
			got = r.Name
		}
		if got != tt.want {
			t.Errorf("RuleFor(%s, %s) = %q, want %q", tt.namespace, tt.image, got, tt.want)
		}
	}
	if p.Rules[0].Mode != ModeEnforce {
		t.Errorf("default mode = %s, want enforce", p.Rules[0].Mode)
	}
}

func TestParsePolicyRefuses(t *testing.T) {
	tests := map[string]struct{ policy, want string }{
		"unknown field":             {"rules: [{authorities: [a], modee: warn}]", "unknown field"},
		"undefined authority":       {"rules: [{authorities: [nobody]}]", `authority "nobody" is not defined`},
		"enforce without authority": {"rules: [{mode: enforce}]", "needs at least one authority"},
		"bad mode":                  {"authorities: [{name: a, keys: {configMap: k}}]\nrules: [{mode: strict, authorities: [a]}]", `mode "strict"`},
		"both keys and keyless": {"authorities: [{name: a, keys: {configMap: k}, keyless: {trustedRoot: {configMap: r}, issuer: i, subject: s}}]",
			"exactly one of keys, keyless and notation"},
		"notation without identities": {"authorities: [{name: a, notation: {trustStore: {configMap: ca}}}]", "needs trustedIdentities"},
		"keyless without identity":    {"authorities: [{name: a, keyless: {trustedRoot: {configMap: r}}}]", "exactly one of issuer"},
		"key source twice":            {"authorities: [{name: a, keys: {configMap: k, secret: s}}]", "exactly one of configMap and secret"},
		"authority twice":             {"authorities: [{name: a, keys: {configMap: k}}, {name: a, keys: {configMap: k}}]", "defined twice"},
		"bad pattern":                 {"authorities: [{name: a, keys: {configMap: k}}]\nrules: [{namespaces: ['[x'], authorities: [a]}]", "pattern"},
	}
	for name, tt := range tests {
		if _, err := ParsePolicy([]byte(tt.policy)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ParsePolicy() = %v, want an error with %q", name, err, tt.want)
		}
	}
}

// PolicySource reads the policy and its keys from the controller's namespace and fails closed when it cannot.
// (A fake client: this checks what is read from where; the controller test runs it against an API server.)
func TestPolicySource(t *testing.T) {
	key := newKey(t)
	objects := []corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "osm-system", Name: "plugin-policy"}, Data: map[string]string{PolicyKey: tenancyPolicy}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "osm-system", Name: "vendor-keys"}, Data: map[string]string{"vendor.pub": string(publicPEM(t, key))}},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "osm-system", Name: "operator-keys"}, Data: map[string][]byte{"cosign.pub": publicPEM(t, key)}}
	b := fake.NewClientBuilder().WithObjects(secret)
	for i := range objects {
		b = b.WithObjects(&objects[i])
	}
	c := b.Build()
	ctx := context.Background()
	src := &PolicySource{Reader: c, Namespace: "osm-system", Name: "plugin-policy", Log: logr.Discard()}

	v, err := src.For(ctx, "tenant-a", "registry.example.com/x@sha256:00")
	if err != nil || v == nil || v.Mode() != ModeEnforce || len(v.authorities) != 1 {
		t.Fatalf("tenant: verifier %+v, %v", v, err)
	}
	if v, err := src.For(ctx, "default", "registry.example.com/x@sha256:00"); v != nil || err != nil {
		t.Errorf("no rule: verifier %+v, %v; want none", v, err)
	}
	if v, err := src.For(ctx, "lab", "registry.example.com/x@sha256:00"); v != nil || err != nil {
		t.Errorf("mode off: verifier %+v, %v; want none", v, err)
	}
	w, err := src.For(ctx, "default", "registry.vendor.test/osm/ubuntu@sha256:00")
	if err != nil || w == nil || w.Mode() != ModeWarn || w.Key() == v.Key() {
		t.Errorf("vendor images: verifier %+v, %v", w, err)
	}

	// A policy naming a missing Secret refuses the images its rule covers, naming what is missing.
	noKeys := &PolicySource{Reader: fake.NewClientBuilder().WithObjects(&objects[0]).Build(), Namespace: "osm-system", Name: "plugin-policy"}
	if _, err := noKeys.For(ctx, "tenant-a", "registry.example.com/x@sha256:00"); err == nil || !strings.Contains(err.Error(), "Secret operator-keys") {
		t.Errorf("missing key Secret: %v", err)
	}
	// A missing policy refuses every image.
	none := &PolicySource{Reader: fake.NewClientBuilder().Build(), Namespace: "osm-system", Name: "plugin-policy"}
	if _, err := none.For(ctx, "default", "registry.example.com/x@sha256:00"); err == nil || !strings.Contains(err.Error(), "osm-system/plugin-policy") {
		t.Errorf("missing policy: %v", err)
	}
}
