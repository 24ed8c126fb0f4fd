package app_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/host/webhooks"
	"github.com/osmhq/osm/sdk/plugintest"
)

// deployDocs renders deploy/ with kubectl's kustomize and returns the objects.
func deployDocs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return kustomize(t, filepath.Join(testenv.RepoRoot(), "deploy"))
}

// deployWithWebhooksDocs renders deploy/ with the given components (paths below deploy/), as an operator's
// kustomization next to deploy/ would.
func deployWithWebhooksDocs(t *testing.T, components ...string) []*unstructured.Unstructured {
	t.Helper()
	if len(components) == 0 {
		components = []string{"webhooks"}
	}
	dir, err := os.MkdirTemp(filepath.Join(testenv.RepoRoot(), "hack"), "kustomize-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var paths []string
	for _, c := range components {
		paths = append(paths, "../../deploy/"+c)
	}
	k := "resources: [../../deploy]\ncomponents: [" + strings.Join(paths, ", ") + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomize(t, dir)
}

func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := exec.Command(testenv.Kubectl(t), "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

// TestDeployManifests checks deploy/: it builds with kustomize, its webhook components ship no webhook for the
// controller to register later (TestWebhooksWithoutCertManager runs them), and its RBAC is enough for the
// controller to do its whole job — proven by running the controller against a real API server as the deploy/
// ServiceAccount.
func TestDeployManifests(t *testing.T) {
	t.Parallel()
	objs := deployDocs(t)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() == "Deployment" {
			// Upstream's selector, which is immutable: deploy/ must apply over upstream's Deployment.
			if sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels"); len(sel) != 1 || sel["app"] != "operating-system-manager" {
				t.Errorf("the Deployment's selector %v is not upstream's {app: operating-system-manager}", sel)
			}
			if img := deploymentImage(o); !strings.HasSuffix(img, ":"+makefileVersion(t)) {
				t.Errorf("the Deployment's image %q is not pinned to the Makefile's VERSION %s", img, makefileVersion(t))
			}
		}
	}
	for _, want := range []string{"CustomResourceDefinition", "Deployment", "ClusterRole", "Role", "Namespace"} {
		if kinds[want] == 0 {
			t.Errorf("deploy/ has no %s (kinds: %v)", want, kinds)
		}
	}
	// Without cert-manager nothing may refuse writes: no webhook configurations, no cert-manager objects.
	for _, unwanted := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "Certificate", "Issuer"} {
		if kinds[unwanted] != 0 {
			t.Errorf("deploy/ has a %s; it belongs in the optional deploy/webhooks component", unwanted)
		}
	}
	checkWebhookComponents(t)

	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			ensureNamespace(t, env, nonEmpty(o.GetNamespace(), "default"))
			if err := env.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
	clusterInfo(t, env)
	if err := env.Client.Create(ctx, testOSP("osp-testos", "v1.0.0")); err != nil {
		t.Fatal(err)
	}
	asController := rest.CopyConfig(env.Config)
	asController.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:operating-system-manager"}
	sa := &testenv.Env{Config: asController, Client: env.Client, Webhook: env.Webhook}
	// What the start-up check asks of deploy/'s RBAC alone, with the optional features that need more on: plugin
	// signature verification (its policy and keys are read from ConfigMaps of the controller's namespace).
	if problems, err := app.Preflight(ctx, app.PreflightOptions{Mgmt: asController, Namespace: "kube-system", UserDataNamespace: userDataNS,
		LeaderElect: true, VerificationPolicy: "plugin-verification"}); err != nil || len(problems) != 0 {
		t.Errorf("deploy/'s RBAC with plugin verification on: %v %v", problems, err)
	}
	// A profile handing its plugin a Secret of its namespace: deploy/ lets the controller read it.
	createRegcodeSecret(t, env.Client, "sles-registration", regcode)
	if err := env.Client.Create(ctx, regcodeOSP("osp-regcode", "cloud-init", "sles-registration")); err != nil {
		t.Fatal(err)
	}
	regcodePlugin := plugintest.Build(t, filepath.Join("testdata", "plugins", "regcode"))
	startOSM(t, sa, nil, app.Options{Builtins: os.DirFS(builtins(t, map[string]string{"regcode": regcodePlugin})), LeaderElect: true,
		Defaults: nil, DisableDefaultOSPs: true})
	withSecret := newMD(t, "rbac-regcode", "testos", "aws", "osp-regcode")
	if err := env.Client.Create(ctx, withSecret); err != nil {
		t.Fatal(err)
	}
	prov := waitForSecret(t, env.Client, "rbac-regcode-kube-system-provisioning-config", "1")
	if got := userDataFiles(t, prov)["/etc/osm/regcode"]; got != "code="+regcode+"\n" {
		t.Errorf("with the deploy/ RBAC, /etc/osm/regcode = %q", got)
	}

	md := newMD(t, "rbac", "testos", "aws", "osp-testos")
	if err := env.Client.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	waitForSecret(t, env.Client, "rbac-kube-system-bootstrap-config", "1")
	waitForSecret(t, env.Client, "rbac-kube-system-provisioning-config", "1")
	if err := env.Client.Delete(ctx, md); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "cleanup with the deploy/ RBAC", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(md), &clusterv1alpha1.MachineDeployment{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("MachineDeployment still there: %w", err)
		}
		return nil
	})
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func deploymentImage(o *unstructured.Unstructured) string {
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		return ""
	}
	img, _, _ := unstructured.NestedString(cs[0].(map[string]any), "image")
	return img
}

// makefileVersion is the Makefile's VERSION, what make image builds.
func makefileVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION ?= "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("the Makefile has no VERSION")
	return ""
}

// checkWebhookComponents checks deploy/webhooks (the controller's own certificate) and deploy/webhooks plus
// webhooks/cert-manager: the webhook configurations ship without a webhook (the controller registers them once
// it serves), so no component can refuse a write before a certificate is served; the Deployment's arguments
// choose the certificate source.
func checkWebhookComponents(t *testing.T) {
	t.Helper()
	for _, tc := range []struct {
		components []string
		kinds      []string
		args       []string
		noKinds    []string
	}{
		{[]string{"webhooks"}, []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "Secret", "Service", "Deployment"},
			[]string{"-webhooks=true"}, []string{"Certificate", "Issuer"}},
		{[]string{"webhooks", "webhooks/cert-manager"}, []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "Certificate", "Issuer", "Deployment"},
			[]string{"-webhooks=true", "-webhook-certs=dir", "-webhook-cert-dir=/etc/osm/webhook-certs"}, nil},
	} {
		kinds := map[string]int{}
		for _, o := range deployWithWebhooksDocs(t, tc.components...) {
			kinds[o.GetKind()]++
			switch o.GetKind() {
			case "Deployment":
				args := deploymentArgs(o)
				for _, want := range tc.args {
					if !slices.Contains(args, want) {
						t.Errorf("%v: the Deployment's arguments %q lack %s", tc.components, args, want)
					}
				}
			case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
				if hooks, found, _ := unstructured.NestedSlice(o.Object, "webhooks"); found || len(hooks) > 0 {
					t.Errorf("%v: %s %s ships webhooks %v; the controller registers them once it serves", tc.components, o.GetKind(), o.GetName(), hooks)
				}
				if o.GetName() != webhooks.ValidatingConfigName {
					t.Errorf("%v: %s is named %s, the controller registers %s", tc.components, o.GetKind(), o.GetName(), webhooks.ValidatingConfigName)
				}
			}
		}
		for _, want := range tc.kinds {
			if kinds[want] == 0 {
				t.Errorf("deploy/ with %v has no %s (kinds %v)", tc.components, want, kinds)
			}
		}
		for _, unwanted := range tc.noKinds {
			if kinds[unwanted] != 0 {
				t.Errorf("deploy/ with %v has a %s", tc.components, unwanted)
			}
		}
	}
}

func deploymentArgs(o *unstructured.Unstructured) []string {
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		return nil
	}
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	return args
}
