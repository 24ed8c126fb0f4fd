package osc

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPluginSecretsDigest: a changed value, name or set of secrets changes the digest (so the user-data is
// written again), the digest never contains a value, and a provisioning Secret written with secrets the
// profile no longer has is brought back to current by an empty digest rather than kept stale forever.
func TestPluginSecretsDigest(t *testing.T) {
	a := pluginSecretsHash(map[string]string{"registration-code": "code-1"})
	for name, other := range map[string]map[string]string{
		"value changed":     {"registration-code": "code-2"},
		"name changed":      {"reg-code": "code-1"},
		"secret added":      {"registration-code": "code-1", "mirror-password": "pw"},
		"boundary shifted":  {"registration-code": "code-", "x": "1"},
		"no secrets at all": nil,
	} {
		if pluginSecretsHash(other) == a {
			t.Errorf("%s: the digest did not change", name)
		}
	}
	if pluginSecretsHash(nil) != "" || strings.Contains(a, "code-1") {
		t.Errorf("digest of no secrets = %q, digest of one = %q", pluginSecretsHash(nil), a)
	}

	ann := map[string]string{AnnotationRenderHash: "h"}
	prov := func(digest string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationPluginSecretsHash: digest}}}
	}
	for _, tc := range []struct {
		name    string
		st      *state
		want    string
		present bool
	}{
		{"no secrets, none before", &state{}, "", false},
		{"secrets", &state{pluginSecretsHash: a}, a, true},
		{"secrets removed from the profile", &state{provisioning: prov(a)}, "", true},
	} {
		got, present := withPluginSecretsHash(tc.st, ann)[AnnotationPluginSecretsHash]
		if got != tc.want || present != tc.present {
			t.Errorf("%s: annotation = %q (present %v), want %q (present %v)", tc.name, got, present, tc.want, tc.present)
		}
		tc.st.provisioning = prov(got)
		if !pluginSecretsCurrent(tc.st) {
			t.Errorf("%s: the Secret written with these annotations is not current", tc.name)
		}
	}
	if pluginSecretsCurrent(&state{pluginSecretsHash: a, provisioning: prov(pluginSecretsHash(map[string]string{"registration-code": "old"}))}) {
		t.Error("a Secret written with an old value counts as current")
	}
}
