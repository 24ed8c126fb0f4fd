package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/osmhq/osm/crds"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/testenv"
)

const upstreamData = "testdata/upstream-v1.11.2"

// upstreamDocs reads the objects of a YAML file of upstream's testdata.
func upstreamDocs(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(upstreamData, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// applyAll creates objs, their namespaces first, and replaces those already there, as kubectl apply would.
func applyAll(t *testing.T, env *testenv.Env, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			ensureNamespace(t, env, ns)
		}
		err := env.Client.Create(ctx, o.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err = env.Client.Get(ctx, client.ObjectKeyFromObject(o), cur); err == nil {
				u := o.DeepCopy()
				u.SetResourceVersion(cur.GetResourceVersion())
				err = env.Client.Update(ctx, u)
			}
		}
		if err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// useUpstreamCRDs replaces OSM's CRDs with upstream v1.11.2's: OSP without its status subresource, OSC and
// OSM's additions, and no OperatingSystemProfileExtension.
func useUpstreamCRDs(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	for _, f := range []string{"operatingsystemmanager.k8c.io_operatingsystemprofiles.yaml", "operatingsystemmanager.k8c.io_operatingsystemconfigs.yaml"} {
		data, err := os.ReadFile(filepath.Join(upstreamData, f))
		if err != nil {
			t.Fatal(err)
		}
		want := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, want); err != nil {
			t.Fatal(err)
		}
		setCRDSpec(t, env, want)
	}
	x := &apiextensionsv1.CustomResourceDefinition{}
	x.Name = "operatingsystemprofileextensions.operatingsystemmanager.k8c.io"
	if err := env.Client.Delete(ctx, x); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "the extension CRD gone", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(x), x); !apierrors.IsNotFound(err) {
			return errors.New("still there")
		}
		return nil
	})
	waitForDiscovery(t, env, func(names map[string]bool) bool {
		return !names["operatingsystemprofileextensions"] && !names["operatingsystemprofiles/status"]
	})
}

// useOSMCRDs puts OSM's CRDs back, as `kubectl apply -k deploy/` does.
func useOSMCRDs(t *testing.T, env *testenv.Env) {
	t.Helper()
	defs, err := crds.OSMDefinitions()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		setCRDSpec(t, env, d)
	}
	waitForDiscovery(t, env, func(names map[string]bool) bool {
		return names["operatingsystemprofileextensions/status"] && names["operatingsystemprofiles/status"]
	})
}

func setCRDSpec(t *testing.T, env *testenv.Env, want *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx := context.Background()
	// A conflict (the API server's own CRD controllers write the status) or a create racing a delete is retried.
	eventually(t, wait, "CRD "+want.Name+" written", func() error {
		cur := &apiextensionsv1.CustomResourceDefinition{}
		err := env.Client.Get(ctx, client.ObjectKey{Name: want.Name}, cur)
		switch {
		case apierrors.IsNotFound(err):
			c := want.DeepCopy()
			c.ResourceVersion = ""
			err = env.Client.Create(ctx, c)
		case err == nil:
			cur.Spec = want.Spec
			err = env.Client.Update(ctx, cur)
		}
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("CRD %s: %v", want.Name, err)
		}
		return err
	})
}

func waitForDiscovery(t *testing.T, env *testenv.Env, ok func(names map[string]bool) bool) {
	t.Helper()
	d, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "discovery to show the CRD change", func() error {
		names := map[string]bool{}
		if l, err := d.ServerResourcesForGroupVersion("operatingsystemmanager.k8c.io/v1alpha1"); err == nil {
			for _, r := range l.APIResources {
				names[r.Name] = true
			}
		}
		if !ok(names) {
			return errors.New("not yet")
		}
		return nil
	})
}

// TestPreflightNamesWhatUpstreamLeaves is the image swap of an operator with upstream OSM v1.11.2 installed:
// upstream's CRDs and RBAC, a MachineDeployment. The controller, started with its start-up check as
// cmd/osm-controller does, refuses to start with one error naming every missing kind and permission (the
// OperatingSystemProfileExtension kind, the status subresources, the Roles and RoleBindings and Secret watches
// in cloud-init-settings, Secret writes in kube-system) and says so in a Warning event on the MachineDeployment. With OSM's CRDs and
// deploy/rbac.yaml applied on top, the check passes.
func TestPreflightNamesWhatUpstreamLeaves(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	applyAll(t, env, upstreamDocs(t, "rbac-controller.yaml"))
	useUpstreamCRDs(t, env)
	md := newMD(t, "swapped", "ubuntu", "aws", "osp-ubuntu")
	if err := env.Client.Create(ctx, md); err != nil {
		t.Fatal(err)
	}

	asController := rest.CopyConfig(env.Config)
	asController.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:operating-system-manager"}
	opts := app.Options{Mgmt: asController, Preflight: true, DisableDefaultOSPs: true}
	fillDefaults(t, env, &opts)
	start := time.Now()
	_, err := app.New(ctx, opts)
	var perr *app.PreflightError
	if !errors.As(err, &perr) {
		t.Fatalf("the controller started with upstream's CRDs and RBAC: %v", err)
	}
	t.Logf("start-up check failed in %v:\n%v", time.Since(start).Round(time.Millisecond), err)
	msg := err.Error()
	for _, want := range []string{
		"no kind operatingsystemprofileextensions.operatingsystemmanager.k8c.io/v1alpha1",
		"operatingsystemprofiles.operatingsystemmanager.k8c.io has no status subresource",
		"may not get, list, watch, create, delete roles.rbac.authorization.k8s.io in namespace cloud-init-settings",
		"may not get, list, watch, create, update, delete rolebindings.rbac.authorization.k8s.io in namespace cloud-init-settings",
		"may not patch, delete secrets in namespace kube-system",
		"apply OSM's RBAC: deploy/rbac.yaml",
		"kubectl apply -k deploy/",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the start-up error does not say %q", want)
		}
	}
	if strings.Contains(msg, "machinedeployments") {
		t.Errorf("upstream's RBAC grants what the controller needs on MachineDeployments, yet the check names them")
	}
	events := &corev1.EventList{}
	if err := env.Client.List(ctx, events, client.InNamespace(md.Namespace)); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		if e.InvolvedObject.Name == md.Name && e.Reason == app.PreflightEventReason && e.Type == corev1.EventTypeWarning &&
			strings.Contains(e.Message, "roles.rbac.authorization.k8s.io") && strings.Contains(e.Message, "docs/migration.md") {
			found = true
		}
	}
	if !found {
		t.Errorf("no %s event on the MachineDeployment", app.PreflightEventReason)
	}

	// The guide's step: OSM's CRDs and RBAC over upstream's.
	useOSMCRDs(t, env)
	applyAll(t, env, deployRBAC(t))
	problems, err := app.Preflight(ctx, app.PreflightOptions{Mgmt: asController, Namespace: "kube-system", UserDataNamespace: userDataNS, LeaderElect: true})
	if err != nil || len(problems) != 0 {
		t.Errorf("with OSM's CRDs and deploy/rbac.yaml: %v %v", problems, err)
	}

	// Webhooks on with the controller's own certificate, without deploy/webhooks' RBAC: the check names the
	// webhook configurations and the certificate's Secret (the rotator would otherwise give up and the
	// controller exit with the refusal in its log); with it, the check passes.
	self := &app.WebhookServing{Certs: app.WebhookCertsSelf}
	problems, err = app.Preflight(ctx, app.PreflightOptions{Mgmt: asController, Namespace: "kube-system", UserDataNamespace: userDataNS, Webhooks: self})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(problems)
	for _, want := range []string{
		"may not update validatingwebhookconfigurations.admissionregistration.k8s.io operating-system-manager",
		"may not get, list, watch mutatingwebhookconfigurations.admissionregistration.k8s.io",
		"may not update secrets " + app.DefaultWebhookCertSecret + " in namespace kube-system",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("webhooks without deploy/webhooks' RBAC: the check does not say %q: %s", want, got)
		}
	}
	applyAll(t, env, manifestDocs(t, filepath.Join("deploy", "webhooks", "rbac.yaml")))
	problems, err = app.Preflight(ctx, app.PreflightOptions{Mgmt: asController, Namespace: "kube-system", UserDataNamespace: userDataNS, Webhooks: self})
	if err != nil || len(problems) != 0 {
		t.Errorf("webhooks with deploy/webhooks' RBAC: %v %v", problems, err)
	}
}

// deployRBAC is deploy/rbac.yaml's objects.
func deployRBAC(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return manifestDocs(t, filepath.Join("deploy", "rbac.yaml"))
}

// manifestDocs is the objects of a YAML file of the repository.
func manifestDocs(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), path))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}
