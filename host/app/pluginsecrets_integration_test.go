package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/host/webhooks"
	"github.com/osmhq/osm/sdk/plugintest"
)

const (
	regcode     = "osm-leak-regcode-4711"
	lateRegcode = "osm-leak-late-regcode-0815"
)

// regcodeOSP is a testos profile rendered by the regcode test plugin, handing it the registration-code secret
// from the key code of Secret secret.
func regcodeOSP(name string, utility osmv1alpha1.ProvisioningUtility, secret string) *osmv1alpha1.OperatingSystemProfile {
	osp := testOSP(name, "v1.0.0")
	osp.Spec.ProvisioningUtility = utility
	osp.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "regcode", Secrets: []osmv1alpha1.PluginSecret{
		{Name: "registration-code", SecretRef: osmv1alpha1.PluginSecretKeyRef{Name: secret, Key: "code"}}}}
	return osp
}

func createRegcodeSecret(t *testing.T, c client.Client, name, value string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: osmNamespace, Name: name},
		Data: map[string][]byte{"code": []byte(value)}}); err != nil {
		t.Fatal(err)
	}
}

// TestPluginSecrets runs the real controller and a real wasm plugin that needs a plugin secret (the regcode
// test plugin, which also echoes every request into events and the log). The profile hands it a Secret of its
// namespace: the provisioning user-data holds the value where the plugin wrote the placeholder, while no OSC,
// event or log line does. Admission refuses malformed or mismatched secrets; a missing Secret stalls with
// PluginSecretMissing, writes nothing, and the MachineDeployment renders once the Secret is created; an encoder
// that drops the placeholder fails its MachineDeployment.
func TestPluginSecrets(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{WebhookInstallOptions: webhookOptions()})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	log := &lockedLog{}
	startOSM(t, env, nil, app.Options{
		Builtins:           os.DirFS(builtins(t, map[string]string{"regcode": plugintest.Build(t, filepath.Join("testdata", "plugins", "regcode"))})),
		DisableDefaultOSPs: true,
		WorkerCount:        2,
		Logger:             funcr.New(log.write, funcr.Options{Verbosity: 1}),
	})
	createRegcodeSecret(t, c, "sles-registration", regcode)
	// The webhook is served by the controller, which may still be starting, and the regcode plugin may still be
	// compiling (admission then answers without the plugin checks the subtests need).
	eventually(t, webhooks.WarmWait, "creating osp-regcode through the webhook with its plugin loaded", func() error {
		return createFullyChecked(ctx, t, env, regcodeOSP("osp-regcode", "cloud-init", "sles-registration"))
	})
	for _, osp := range []*osmv1alpha1.OperatingSystemProfile{
		regcodeOSP("osp-regcode-format", "regcode-format", "sles-registration"),
		regcodeOSP("osp-regcode-late", "cloud-init", "late-registration"),
	} {
		if err := c.Create(ctx, osp); err != nil {
			t.Fatalf("creating %s: %v", osp.Name, err)
		}
	}

	t.Run("admission refuses malformed and mismatched plugin secrets", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			mutate func(*osmv1alpha1.OperatingSystemProfile)
			want   string
		}{
			{"required secret missing", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.Plugin.Secrets = nil },
				"secret registration-code is required"},
			{"undeclared secret", func(o *osmv1alpha1.OperatingSystemProfile) {
				o.Spec.Plugin.Secrets = append(o.Spec.Plugin.Secrets, osmv1alpha1.PluginSecret{Name: "mirror-password",
					SecretRef: osmv1alpha1.PluginSecretKeyRef{Name: "sles-registration", Key: "code"}})
			}, "mirror-password is not a secret of plugin regcode (known: registration-code)"},
			{"name not a label", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.Plugin.Secrets[0].Name = "Registration_Code" },
				"spec.plugin.secrets[0].name"},
			{"duplicate name", func(o *osmv1alpha1.OperatingSystemProfile) {
				o.Spec.Plugin.Secrets = append(o.Spec.Plugin.Secrets, o.Spec.Plugin.Secrets[0])
			}, "Duplicate value"},
			{"empty Secret name", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.Plugin.Secrets[0].SecretRef.Name = "" },
				"spec.plugin.secrets[0].secretRef.name"},
			{"secrets on a pipeline plugin", func(o *osmv1alpha1.OperatingSystemProfile) {
				o.Spec.Plugins = []osmv1alpha1.PluginReference{*o.Spec.Plugin}
			}, "only spec.plugin takes secrets"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				osp := regcodeOSP("osp-refused", "cloud-init", "sles-registration")
				tc.mutate(osp)
				err := c.Create(ctx, osp)
				if err == nil {
					_ = c.Delete(ctx, osp)
					t.Fatal("accepted")
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("refused for another reason; want %q in: %v", tc.want, err)
				}
			})
		}
		x := &osmv1alpha1.OperatingSystemProfileExtension{ObjectMeta: metav1.ObjectMeta{Name: "x-secret", Namespace: osmNamespace},
			Spec: osmv1alpha1.OperatingSystemProfileExtensionSpec{Plugins: []osmv1alpha1.PluginReference{{Builtin: "regcode",
				Secrets: []osmv1alpha1.PluginSecret{{Name: "registration-code", SecretRef: osmv1alpha1.PluginSecretKeyRef{Name: "sles-registration", Key: "code"}}}}}}}
		if err := c.Create(ctx, x); err == nil || !strings.Contains(err.Error(), "only a profile's spec.plugin takes secrets") {
			t.Errorf("an extension plugin with secrets: %v", err)
		}
	})

	mds := map[string]*clusterv1alpha1.MachineDeployment{
		"reg-a":  newMD(t, "reg-a", "testos", "aws", "osp-regcode"),
		"keep-b": newMD(t, "keep-b", "testos", "aws", "osp-regcode-format"),
		"drop-c": newMD(t, "drop-c", "testos", "aws", "osp-regcode-format"),
		"late-d": newMD(t, "late-d", "testos", "aws", "osp-regcode-late"),
	}
	for _, md := range mds {
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
	}
	placeholder := render.PluginSecretPlaceholder("registration-code")

	t.Run("the provisioning user-data holds the value where the plugin wrote the placeholder", func(t *testing.T) {
		prov := waitForSecret(t, c, "reg-a-kube-system-provisioning-config", "1")
		if got := userDataFiles(t, prov)["/etc/osm/regcode"]; got != "code="+regcode+"\n" {
			t.Errorf("/etc/osm/regcode = %q", got)
		}
		if prov.Annotations[osc.AnnotationPluginSecretsHash] == "" {
			t.Error("the provisioning Secret has no plugin secrets digest; a changed value would never be written")
		}
		boot := waitForSecret(t, c, "reg-a-kube-system-bootstrap-config", "1")
		if strings.Contains(userDataText(t, boot), regcode) {
			t.Error("the bootstrap user-data holds the secret, which the plugin only wrote into the provisioning stage")
		}
		// Through the plugin's own encoder, too.
		keep := waitForSecret(t, c, "keep-b-kube-system-provisioning-config", "1")
		if !strings.Contains(string(keep.Data[render.CloudConfigKey]), "code="+regcode) || strings.Contains(string(keep.Data[render.CloudConfigKey]), placeholder) {
			t.Error("the plugin-encoded provisioning user-data does not hold the substituted value")
		}
	})

	t.Run("an encoder that drops the placeholder fails its MachineDeployment", func(t *testing.T) {
		waitForCondition(t, c, mds["drop-c"], osmv1alpha1.ReasonPluginFailed, "placeholder "+placeholder)
		waitForEvent(t, c, "drop-c", osmv1alpha1.ReasonPluginFailed)
		noUserData(t, c, "drop-c")
	})

	t.Run("a missing Secret stalls with PluginSecretMissing; the MachineDeployment renders once it exists", func(t *testing.T) {
		waitForCondition(t, c, mds["late-d"], osmv1alpha1.ReasonPluginSecretMissing, "Secret kube-system/late-registration does not exist")
		waitForEvent(t, c, "late-d", osmv1alpha1.ReasonPluginSecretMissing)
		noUserData(t, c, "late-d")
		createRegcodeSecret(t, c, "late-registration", lateRegcode)
		prov := waitForSecret(t, c, "late-d-kube-system-provisioning-config", "1")
		if got := userDataFiles(t, prov)["/etc/osm/regcode"]; got != "code="+lateRegcode+"\n" {
			t.Errorf("/etc/osm/regcode = %q", got)
		}
		waitForCondition(t, c, mds["late-d"], osmv1alpha1.ReasonSucceeded, "")
	})

	t.Run("no OSC, event or log line holds a value", func(t *testing.T) {
		oscs := &osmv1alpha1.OperatingSystemConfigList{}
		events := &corev1.EventList{}
		if err := c.List(ctx, oscs); err != nil {
			t.Fatal(err)
		}
		if err := c.List(ctx, events); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(asJSON(t, oscs), "code="+placeholder) {
			t.Error("the OSCs do not hold the placeholder the plugin wrote; the check below proves nothing")
		}
		if !strings.Contains(log.String(), "regcode render request") || !strings.Contains(asJSON(t, events), "regcode: ") {
			t.Error("the plugin's echo did not reach the log and the events; the check below proves nothing")
		}
		places := map[string]string{"OperatingSystemConfigs": asJSON(t, oscs), "events": asJSON(t, events), "controller log": log.String()}
		for place, text := range places {
			for _, value := range []string{regcode, lateRegcode} {
				if i := strings.Index(text, value); i >= 0 {
					t.Errorf("the %s hold a plugin secret: ...%s...", place, text[max(0, i-300):min(len(text), i+100)])
				}
			}
		}
	})
}

// waitForCondition waits until the MachineDeployment's OSC is Ready with reason (True for Succeeded, False
// otherwise) and a message containing text.
func waitForCondition(t *testing.T, c client.Client, md *clusterv1alpha1.MachineDeployment, reason, text string) {
	t.Helper()
	eventually(t, wait, md.Name+" Ready with reason "+reason, func() error {
		got := &osmv1alpha1.OperatingSystemConfig{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(md)}, got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, osmv1alpha1.ConditionReady)
		if cond == nil || cond.Reason != reason || !strings.Contains(cond.Message, text) {
			return fmt.Errorf("Ready condition = %+v", cond)
		}
		return nil
	})
}

// noUserData fails when a user-data Secret of the MachineDeployment name was written.
func noUserData(t *testing.T, c client.Client, name string) {
	t.Helper()
	for _, s := range []string{"bootstrap", "provisioning"} {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: userDataNS, Name: name + "-kube-system-" + s + "-config"}, &corev1.Secret{}); err == nil {
			t.Errorf("%s: the %s Secret was written", name, s)
		}
	}
}
