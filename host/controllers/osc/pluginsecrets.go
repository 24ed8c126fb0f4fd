package osc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/internal/failure"
	"github.com/osmhq/osm/sdk/abi"
)

// AnnotationPluginSecretsHash on the provisioning Secret is a digest of the plugin secret values substituted
// into the user-data, so that a changed value (a rotated registration code) is written at the next reconcile.
// It sits only on that Secret, which holds the values themselves; it never goes on the OSC.
const AnnotationPluginSecretsHash = "osm.k8c.io/plugin-secrets-hash"

// DefaultPluginSecretRetry is how soon a MachineDeployment whose profile refers to a missing plugin Secret is
// looked at again: the Secrets are not watched (the controller caches only the Secrets it writes), and an
// operator who creates the missing one expects it to be used without touching anything else.
const DefaultPluginSecretRetry = 15 * time.Second

// loadPluginSecrets reads the values of the profile's spec.plugin.secrets from the profile's namespace, with
// a direct API read: the informer caches hold only the Secrets OSM writes. A Secret or key that is missing (or
// that the controller may not read) fails the MachineDeployment with PluginSecretMissing before anything is
// issued or written, and it is looked for again every PluginSecretRetry; the message names the Secret and key,
// never a value.
func (r *Reconciler) loadPluginSecrets(ctx context.Context, st *state) error {
	if st.osp.Spec.Plugin == nil || len(st.osp.Spec.Plugin.Secrets) == 0 {
		return nil
	}
	values := make(map[string]string, len(st.osp.Spec.Plugin.Secrets))
	for _, ps := range st.osp.Spec.Plugin.Secrets {
		v, err := r.pluginSecretValue(ctx, st.osp, ps)
		if err != nil {
			return err
		}
		values[ps.Name] = v
	}
	st.pluginSecrets = values
	st.pluginSecretsHash = pluginSecretsHash(values)
	return nil
}

func (r *Reconciler) pluginSecretValue(ctx context.Context, osp *osmv1alpha1.OperatingSystemProfile, ps osmv1alpha1.PluginSecret) (string, error) {
	key := client.ObjectKey{Namespace: osp.Namespace, Name: ps.SecretRef.Name}
	what := fmt.Sprintf("profile %s/%s spec.plugin.secrets %s: Secret %s", osp.Namespace, osp.Name, ps.Name, key)
	if r.MgmtAPIReader == nil {
		return "", r.pluginSecretMissing(fmt.Errorf("%s cannot be read: the controller has no API reader for profiles' Secrets", what))
	}
	secret := &corev1.Secret{}
	switch err := r.MgmtAPIReader.Get(ctx, key, secret); {
	case apierrors.IsNotFound(err):
		return "", r.pluginSecretMissing(fmt.Errorf("%s does not exist; create it with the key %q", what, ps.SecretRef.Key))
	case apierrors.IsForbidden(err):
		return "", r.pluginSecretMissing(fmt.Errorf("%s may not be read by the controller: grant it get on secrets in namespace %s", what, key.Namespace))
	case err != nil:
		return "", fmt.Errorf("reading %s: %w", what, err)
	}
	v, ok := secret.Data[ps.SecretRef.Key]
	if !ok {
		return "", r.pluginSecretMissing(fmt.Errorf("%s has no key %q (it has %d other keys)", what, ps.SecretRef.Key, len(secret.Data)))
	}
	return string(v), nil
}

// pluginSecretMissing waits for the Secret: nothing watches it (see DefaultPluginSecretRetry).
func (r *Reconciler) pluginSecretMissing(err error) error {
	return failure.Waiting(osmv1alpha1.ReasonPluginSecretMissing, err, 0)
}

// pluginSecretsHash digests the values by name; "" when there are none, which is what a provisioning Secret
// without the annotation compares equal to.
func pluginSecretsHash(values map[string]string) string {
	if len(values) == 0 {
		return ""
	}
	h := sha256.New()
	for _, name := range abi.SortedKeys(values) {
		_, _ = fmt.Fprintf(h, "%d:%s%d:%s", len(name), name, len(values[name]), values[name]) // a hash never fails to write
	}
	return hex.EncodeToString(h.Sum(nil))
}

// pluginSecretsCurrent reports whether the provisioning Secret was written with the current values.
func pluginSecretsCurrent(st *state) bool {
	return st.provisioning.Annotations[AnnotationPluginSecretsHash] == st.pluginSecretsHash
}

// withPluginSecretsHash returns the provisioning Secret's annotations: ann with the digest of the plugin
// secrets. A Secret written with secrets the profile no longer has gets an empty digest (annotations are
// merged, so leaving it out would keep the old one, and the Secret would never look current again).
func withPluginSecretsHash(st *state, ann map[string]string) map[string]string {
	out := maps.Clone(ann)
	if st.pluginSecretsHash != "" || (st.provisioning != nil && st.provisioning.Annotations[AnnotationPluginSecretsHash] != "") {
		out[AnnotationPluginSecretsHash] = st.pluginSecretsHash
	}
	return out
}
