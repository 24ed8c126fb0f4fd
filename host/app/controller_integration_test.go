package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/encode/cloudinit/cloudinittest"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/host/webhooks"
)

const wait = 60 * time.Second

// TestControllerAgainstRealAPIServer runs the whole controller (reconcilers, webhooks, plugin runtime) against a
// real kube-apiserver and checks the contract with machine-controller end to end. The profiles are shared; each
// subtest creates the MachineDeployments (and the profile it changes) it needs, so any one runs alone
// (go test -run 'TestControllerAgainstRealAPIServer/<name>').
func TestControllerAgainstRealAPIServer(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{WebhookInstallOptions: webhookOptions()})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	startOSM(t, env, nil, app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true, WorkerCount: 4})

	upstream := &osmv1alpha1.OperatingSystemProfile{}
	readYAMLFile(t, filepath.Join(testenv.RepoRoot(), "crds", "testdata", "upstream", "osp-ubuntu.yaml"), upstream)
	// The webhook is served by the controller, which may still be starting.
	eventually(t, wait, "creating the upstream ubuntu profile through the webhook", func() error { return c.Create(ctx, upstream.DeepCopy()) })
	// Its plugin may still be compiling (admission then answers within validation.AdmissionPluginWait without
	// the plugin checks); the subtests below need the webhook to check with the plugin.
	eventually(t, webhooks.WarmWait, "creating the testos profile with its plugin loaded", func() error {
		return createFullyChecked(ctx, t, env, testOSP("osp-testos", "v1.0.0"))
	})

	t.Run("MD gets user-data Secrets with machine-controller's names, key and annotations", func(t *testing.T) {
		md := newMD(t, "workers", "ubuntu", "aws", "osp-ubuntu")
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		boot := waitForSecret(t, c, "workers-kube-system-bootstrap-config", "1")
		prov := waitForSecret(t, c, "workers-kube-system-provisioning-config", "1")
		for _, s := range []*corev1.Secret{boot, prov} {
			cloudinittest.Validate(t, s.Name, s.Data["cloud-config"])
			if s.Annotations["k8c.io/osp-version"] != upstream.Spec.Version {
				t.Errorf("%s: osp-version annotation = %q", s.Name, s.Annotations["k8c.io/osp-version"])
			}
		}
		// The bootstrap user-data carries a working, scoped credential instead of a placeholder.
		token := string(boot.Data[osc.KeyProvisioningToken])
		if token == "" || !strings.Contains(decodeBootstrapScript(t, boot), "Bearer "+token) {
			t.Errorf("bootstrap user-data does not carry the provisioning token")
		}
		got := &osmv1alpha1.OperatingSystemConfig{}
		eventually(t, wait, "OSC ready", func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "workers.kube-system-config"}, got); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(got.Status.Conditions, osmv1alpha1.ConditionReady) {
				return fmt.Errorf("conditions: %+v", got.Status.Conditions)
			}
			return nil
		})
		oscJSON := asJSON(t, got)
		if strings.Contains(oscJSON, token) || strings.Contains(oscJSON, bootstrapTokenOf(t, c, md)) {
			t.Errorf("the OSC holds a credential")
		}
		if got.Status.BootstrapSecret != "cloud-init-settings/workers-kube-system-bootstrap-config" || got.Status.BootstrapSize == 0 {
			t.Errorf("status = %+v", got.Status)
		}
		fresh := &clusterv1alpha1.MachineDeployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(md), fresh); err != nil || !slices.Contains(fresh.Finalizers, osc.Finalizer) {
			t.Errorf("finalizer %s missing: %v %v", osc.Finalizer, fresh.Finalizers, err)
		}
	})

	t.Run("the node credential reads its own provisioning data and nothing else", func(t *testing.T) {
		boot, _ := renderedMD(t, c, "reader")
		renderedMD(t, c, "other")
		node := nodeClient(t, env, string(boot.Data[osc.KeyProvisioningToken]))
		own := &corev1.Secret{}
		if err := node.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "reader-kube-system-provisioning-config"}, own); err != nil {
			t.Fatalf("the node cannot read its own provisioning Secret: %v", err)
		}
		if err := node.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "reader.kube-system-kubelet-bootstrap-config"}, &corev1.Secret{}); err != nil {
			t.Fatalf("the node cannot read its kubelet bootstrap kubeconfig: %v", err)
		}
		for _, forbidden := range []client.ObjectKey{
			{Namespace: userDataNS, Name: "other-kube-system-provisioning-config"},
			{Namespace: userDataNS, Name: "reader-kube-system-bootstrap-config"},
			{Namespace: "kube-system", Name: "cluster-admin-token"},
		} {
			if err := node.Get(ctx, forbidden, &corev1.Secret{}); !apierrors.IsForbidden(err) {
				t.Errorf("reading %s: want 403 Forbidden, got %v", forbidden, err)
			}
		}
		if err := node.List(ctx, &corev1.SecretList{}, client.InNamespace(userDataNS)); !apierrors.IsForbidden(err) {
			t.Errorf("listing Secrets: want 403 Forbidden, got %v", err)
		}
	})

	t.Run("a new MD revision re-renders", func(t *testing.T) {
		_, md := renderedMD(t, c, "revised")
		eventually(t, wait, "the next revision written", func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
				return err
			}
			md.Annotations[clusterv1alpha1.AnnotationRevision] = "2"
			md.Spec.Template.Spec.Versions.Kubelet = "1.34.1"
			return c.Update(ctx, md) // conflicts while the controller adds its finalizer
		})
		prov := waitForSecret(t, c, "revised-kube-system-provisioning-config", "2")
		if !strings.Contains(decodedFiles(t, prov), `KUBE_VERSION="${KUBE_VERSION:-v1.34.1}"`) {
			t.Errorf("provisioning user-data not rendered for kubelet 1.34.1")
		}
		waitForSecret(t, c, "revised-kube-system-bootstrap-config", "2")
	})

	t.Run("a profile version bump re-renders its MachineDeployments", func(t *testing.T) {
		// A profile of its own: the version bump must not re-render the other subtests' MachineDeployments.
		osp := upstream.DeepCopy()
		osp.Name = "osp-ubuntu-bumped"
		if err := c.Create(ctx, osp); err != nil {
			t.Fatal(err)
		}
		md := newMD(t, "bumped", "ubuntu", "aws", osp.Name)
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		waitForSecret(t, c, "bumped-kube-system-provisioning-config", "1")
		// The profile's status is written meanwhile: each change is made to the profile as it is now.
		change := func(version string) error {
			for {
				if err := c.Get(ctx, client.ObjectKeyFromObject(osp), osp); err != nil {
					return err
				}
				osp.Spec.ProvisioningConfig.Files = append(osp.Spec.ProvisioningConfig.Files, osmv1alpha1.File{Path: "/etc/osm-bumped",
					Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "bumped\n"}}})
				if version != "" {
					osp.Spec.Version = version
				}
				if err := c.Update(ctx, osp); !apierrors.IsConflict(err) {
					return err
				}
			}
		}
		if err := change(""); err == nil || !strings.Contains(err.Error(), "spec.version") {
			t.Fatalf("a spec change without a version bump must be rejected naming spec.version, got %v", err)
		}
		if err := change("v1.99.0"); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "re-render with the new file", func() error {
			s := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "bumped-kube-system-provisioning-config"}, s); err != nil {
				return err
			}
			if s.Annotations["k8c.io/osp-version"] != "v1.99.0" || !strings.Contains(string(s.Data["cloud-config"]), "/etc/osm-bumped") {
				return fmt.Errorf("osp-version %q", s.Annotations["k8c.io/osp-version"])
			}
			return nil
		})
	})

	t.Run("a deleted Secret comes back", func(t *testing.T) {
		renderedMD(t, c, "restored")
		prov := waitForSecret(t, c, "restored-kube-system-provisioning-config", "1")
		if err := c.Delete(ctx, prov, client.Preconditions{UID: &prov.UID}); err != nil {
			t.Fatal(err)
		}
		if back := waitForSecret(t, c, prov.Name, "1"); back.UID == prov.UID {
			t.Errorf("the deleted Secret is still there")
		}
	})

	t.Run("deleting the bootstrap token revokes it and issues a new one at once", func(t *testing.T) {
		_, md := renderedMD(t, c, "revoked")
		old := bootstrapTokenOf(t, c, md)
		id, _, _ := strings.Cut(old, ".")
		tok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-" + id}}
		if err := c.Delete(ctx, tok); err != nil {
			t.Fatal(err)
		}
		// Well before the token's refresh (hours away): only the deletion event can bring this about.
		var boot *corev1.Secret
		eventually(t, wait, "a new token in the bootstrap user-data", func() error {
			boot = &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "revoked-kube-system-bootstrap-config"}, boot); err != nil {
				return err
			}
			if got := string(boot.Data[osc.KeyProvisioningToken]); got == old || got == "" {
				return fmt.Errorf("still the revoked token")
			}
			return nil
		})
		// The API server's token authenticator reads Secrets from its own informer, a moment behind.
		eventually(t, wait, "the revoked token is refused", func() error {
			err := nodeClient(t, env, old).Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "revoked-kube-system-provisioning-config"}, &corev1.Secret{})
			if !apierrors.IsUnauthorized(err) {
				return fmt.Errorf("want 401 Unauthorized, got %w", err)
			}
			return nil
		})
		eventually(t, wait, "the new token reads its provisioning data", func() error {
			return nodeClient(t, env, string(boot.Data[osc.KeyProvisioningToken])).Get(ctx,
				client.ObjectKey{Namespace: userDataNS, Name: "revoked-kube-system-provisioning-config"}, &corev1.Secret{})
		})
	})

	t.Run("a deleted reader Role or RoleBinding comes back", func(t *testing.T) {
		boot, _ := renderedMD(t, c, "rbac")
		node := nodeClient(t, env, string(boot.Data[osc.KeyProvisioningToken]))
		own := client.ObjectKey{Namespace: userDataNS, Name: "rbac-kube-system-provisioning-config"}
		name := client.ObjectKey{Namespace: userDataNS, Name: "rbac.kube-system-provisioning-reader"}
		for _, obj := range []client.Object{&rbacv1.RoleBinding{}, &rbacv1.Role{}} {
			if err := c.Get(ctx, name, obj); err != nil {
				t.Fatal(err)
			}
			uid := obj.GetUID()
			if err := c.Delete(ctx, obj); err != nil {
				t.Fatal(err)
			}
			kind := fmt.Sprintf("%T", obj)
			eventually(t, wait, kind+" recreated", func() error {
				if err := c.Get(ctx, name, obj); err != nil {
					return err
				}
				if obj.GetUID() == uid {
					return fmt.Errorf("still the deleted one")
				}
				return nil
			})
			// The node's token reads its provisioning data again (the API server's RBAC cache follows shortly).
			eventually(t, wait, "the node reads its provisioning data after the "+kind+" came back", func() error {
				return node.Get(ctx, own, &corev1.Secret{})
			})
		}
	})

	t.Run("a broken profile is rejected at admission naming the field", func(t *testing.T) {
		bad := testOSP("osp-broken", "v1.0.0")
		bad.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = "{{ .NoSuchField }}"
		err := c.Create(ctx, bad)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.provisioningConfig.files[0].content.inline.data") {
			t.Fatalf("want an Invalid error naming the template's field, got %v", err)
		}
		unknown := testOSP("osp-unknown-plugin", "v1.0.0")
		unknown.Spec.Plugin.Builtin = "does-not-exist"
		if err := c.Create(ctx, unknown); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.plugin.builtin") {
			t.Fatalf("want an Invalid error naming spec.plugin.builtin, got %v", err)
		}
	})

	t.Run("the OSC spec is immutable", func(t *testing.T) {
		renderedMD(t, c, "immutable")
		got := &osmv1alpha1.OperatingSystemConfig{}
		eventually(t, wait, "the rendered OSC", func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "immutable.kube-system-config"}, got); err != nil {
				return err
			}
			if got.Annotations[osc.AnnotationRenderHash] == "" {
				return fmt.Errorf("not rendered yet")
			}
			return nil
		})
		got.Spec.OSVersion = "changed"
		if err := c.Update(ctx, got); err == nil || !strings.Contains(err.Error(), "immutable") {
			t.Fatalf("want the webhook to refuse a spec change, got %v", err)
		}
	})

	t.Run("a MachineDeployment without a profile gets the default profile's name", func(t *testing.T) {
		md := newMD(t, "defaulted", "flatcar", "aws", "")
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		if md.Annotations[clusterv1alpha1.AnnotationOSP] != "osp-flatcar" {
			t.Errorf("annotations after create = %v", md.Annotations)
		}
	})

	// Before the hostile plugin subtest: the plugin both use may be quarantined after it (docs/security.md).
	t.Run("a bootstrap over the provider limit fails loudly", func(t *testing.T) {
		md := newMD(t, "many-keys", "testos", "aws", "osp-testos")
		var pc map[string]any
		if err := json.Unmarshal(md.Spec.Template.Spec.ProviderSpec.Value.Raw, &pc); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for i := range 40 {
			keys = append(keys, fmt.Sprintf("ssh-rsa %s key-%d@example.com", strings.Repeat("A", 716), i))
		}
		pc["sshPublicKeys"] = keys
		md.Spec.Template.Spec.ProviderSpec.Value.Raw, _ = json.Marshal(pc)
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		got := &osmv1alpha1.OperatingSystemConfig{}
		eventually(t, wait, "BootstrapTooLarge reported", func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "many-keys.kube-system-config"}, got); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, osmv1alpha1.ConditionReady)
			if cond == nil || cond.Reason != osmv1alpha1.ReasonBootstrapTooLarge || !strings.Contains(cond.Message, "16384 bytes") {
				return fmt.Errorf("Ready condition = %+v", cond)
			}
			return nil
		})
		waitForEvent(t, c, "many-keys", osmv1alpha1.ReasonBootstrapTooLarge)
		if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "many-keys-kube-system-bootstrap-config"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("an oversized bootstrap Secret was written (err=%v)", err)
		}
	})

	t.Run("a hostile plugin fails only its MachineDeployments", func(t *testing.T) {
		names := []string{"loop-a", "panic-a", "oom-a", "recurse-a", "recurse-b", "garbage-a", "error-a", "healthy-a", "healthy-b"}
		for _, n := range names {
			if err := c.Create(ctx, newMD(t, n, "testos", "openstack", "osp-testos")); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range []string{"healthy-a", "healthy-b"} {
			waitForSecret(t, c, n+"-kube-system-bootstrap-config", "1")
		}
		for _, n := range []string{"loop-a", "panic-a", "oom-a", "recurse-a", "recurse-b", "garbage-a", "error-a"} {
			cond := waitForNotReady(t, c, n+".kube-system-config", osmv1alpha1.ReasonPluginFailed, `"selective"`)
			t.Logf("%s: %s", n, cond.Message)
			if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: n + "-kube-system-bootstrap-config"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s: a bootstrap Secret exists for a failed render (err=%v)", n, err)
			}
			waitForEvent(t, c, n, osmv1alpha1.ReasonPluginFailed)
		}
		// After all that, the controller still serves new work.
		if err := c.Create(ctx, newMD(t, "healthy-c", "testos", "aws", "osp-testos")); err != nil {
			t.Fatal(err)
		}
		waitForSecret(t, c, "healthy-c-kube-system-bootstrap-config", "1")
	})

	t.Run("deleting the MachineDeployment removes everything OSM created for it", func(t *testing.T) {
		_, md := renderedMD(t, c, "deleted")
		if err := c.Delete(ctx, md); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "MachineDeployment gone", func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(md), md); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (finalizers %v)", md.Finalizers)
			}
			return nil
		})
		sel := client.MatchingLabels(credentials.Labels(md))
		for _, l := range []struct {
			list client.ObjectList
			ns   string
		}{
			{&osmv1alpha1.OperatingSystemConfigList{}, osmNamespace},
			{&corev1.SecretList{}, userDataNS},
			{&corev1.SecretList{}, "kube-system"},
			{&corev1.ServiceAccountList{}, userDataNS},
			{&rbacv1.RoleList{}, userDataNS},
			{&rbacv1.RoleBindingList{}, userDataNS},
		} {
			if err := c.List(ctx, l.list, client.InNamespace(l.ns), sel); err != nil {
				t.Fatal(err)
			}
			if n := meta.LenList(l.list); n != 0 {
				t.Errorf("%T in %s: %d objects left", l.list, l.ns, n)
			}
		}
	})
}

// renderedMD creates a MachineDeployment on the upstream Ubuntu profile and returns its bootstrap Secret, once
// its user-data is written, and itself.
func renderedMD(t *testing.T, c client.Client, name string) (*corev1.Secret, *clusterv1alpha1.MachineDeployment) {
	t.Helper()
	md := newMD(t, name, "ubuntu", "aws", "osp-ubuntu")
	if err := c.Create(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	waitForSecret(t, c, name+"-kube-system-provisioning-config", "1")
	return waitForSecret(t, c, name+"-kube-system-bootstrap-config", "1"), md
}

func waitForSecret(t *testing.T, c client.Client, name, revision string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	eventually(t, wait, "Secret "+name+" at revision "+revision, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: userDataNS, Name: name}, s); err != nil {
			return err
		}
		if got := s.Annotations["k8c.io/machine-deployment-revision"]; got != revision {
			return fmt.Errorf("revision annotation %q", got)
		}
		if len(s.Data[render.CloudConfigKey]) == 0 {
			return fmt.Errorf("no %s key", render.CloudConfigKey)
		}
		return nil
	})
	return s
}

func waitForEvent(t *testing.T, c client.Client, mdName, reason string) {
	t.Helper()
	eventually(t, wait, "event "+reason+" on "+mdName, func() error {
		events := &corev1.EventList{}
		if err := c.List(context.Background(), events, client.InNamespace("kube-system")); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == mdName && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no %s event", reason)
	})
}
