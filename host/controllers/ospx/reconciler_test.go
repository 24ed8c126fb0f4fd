package ospx

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/scheme"
	"github.com/osmhq/osm/host/validation"
)

const ns = "team-a"

// profile is a valid templates-only profile.
func profile(namespace, name string, os osmv1alpha1.OperatingSystem) *osmv1alpha1.OperatingSystemProfile {
	return &osmv1alpha1.OperatingSystemProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: osmv1alpha1.OperatingSystemProfileSpec{
			OSName: os, OSVersion: "1", Version: "v1.0.0",
			SupportedCloudProviders: []osmv1alpha1.CloudProviderSpec{{Name: "aws"}},
			ProvisioningConfig: osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{{Path: "/etc/motd",
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "hello {{ .KubeVersion }}"}}}}},
		},
	}
}

// newExtension writes a file on the profiles sel selects.
func newExtension(name string, order int32, sel osmv1alpha1.ProfileSelector, path string, overrides ...string) *osmv1alpha1.OperatingSystemProfileExtension {
	return &osmv1alpha1.OperatingSystemProfileExtension{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 3},
		Spec: osmv1alpha1.OperatingSystemProfileExtensionSpec{Selector: sel, Order: order,
			ProvisioningConfig: &osmv1alpha1.ExtensionConfig{Overrides: overrides, Files: []osmv1alpha1.File{{Path: path,
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: name}}}}}},
	}
}

func newClient(funcs *interceptor.Funcs, objs ...client.Object) client.Client {
	b := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithStatusSubresource(&osmv1alpha1.OperatingSystemProfileExtension{}).WithObjects(objs...)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return b.Build()
}

func request(name string) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
}

func TestReconcile(t *testing.T) {
	profiles := []client.Object{
		profile(ns, "osp-ubuntu", "ubuntu"), profile(ns, "osp-flatcar", "flatcar"), profile(ns, "osp-rhel", "rhel"),
		profile("team-b", "osp-ubuntu-b", "ubuntu"), // another namespace: never listed
	}
	byOS := osmv1alpha1.ProfileSelector{OSNames: []osmv1alpha1.OperatingSystem{"ubuntu", "rhel"}}
	labelled := profile(ns, "osp-labelled", "ubuntu")
	labelled.Labels = map[string]string{"tier": "gold"}

	for _, tc := range []struct {
		name     string
		x        *osmv1alpha1.OperatingSystemProfileExtension
		others   []client.Object
		profiles []string
		status   metav1.ConditionStatus
		reason   string
		message  string // a substring of Ready's message
	}{
		{name: "selects by OS, in its namespace, sorted", x: newExtension("site", 0, byOS, "/etc/site"),
			profiles: []string{"osp-rhel", "osp-ubuntu"}, status: metav1.ConditionTrue, reason: osmv1alpha1.ReasonSucceeded,
			message: "renders with every profile it selects"},
		{name: "selects by name", x: newExtension("site", 0, osmv1alpha1.ProfileSelector{Names: []string{"osp-flatcar", "osp-gone"}}, "/etc/site"),
			profiles: []string{"osp-flatcar"}, status: metav1.ConditionTrue, reason: osmv1alpha1.ReasonSucceeded},
		{name: "selects by label", x: newExtension("site", 0, osmv1alpha1.ProfileSelector{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}, "/etc/site"),
			others: []client.Object{labelled}, profiles: []string{"osp-labelled"}, status: metav1.ConditionTrue, reason: osmv1alpha1.ReasonSucceeded},
		{name: "selects nothing", x: newExtension("site", 0, osmv1alpha1.ProfileSelector{Names: []string{"osp-gone"}}, "/etc/site"),
			status: metav1.ConditionTrue, reason: osmv1alpha1.ReasonSucceeded},
		{name: "invalid structure", x: newExtension("site", 0, byOS, "etc/site"),
			profiles: []string{"osp-rhel", "osp-ubuntu"}, status: metav1.ConditionFalse, reason: osmv1alpha1.ReasonExtensionInvalid,
			message: "spec.provisioningConfig.files[0].path"},
		{name: "writes a profile's file without overriding it", x: newExtension("site", 0, byOS, "/etc/motd"),
			profiles: []string{"osp-rhel", "osp-ubuntu"}, status: metav1.ConditionFalse, reason: osmv1alpha1.ReasonExtensionConflict,
			message: "/etc/motd"},
		{name: "overrides a profile's file", x: newExtension("site", 0, byOS, "/etc/motd", "/etc/motd"),
			profiles: []string{"osp-rhel", "osp-ubuntu"}, status: metav1.ConditionTrue, reason: osmv1alpha1.ReasonSucceeded},
		{name: "conflicts with another extension", x: newExtension("site", 20, byOS, "/etc/site"),
			others:   []client.Object{newExtension("baseline", 10, osmv1alpha1.ProfileSelector{Names: []string{"osp-ubuntu"}}, "/etc/site")},
			profiles: []string{"osp-rhel", "osp-ubuntu"}, status: metav1.ConditionFalse, reason: osmv1alpha1.ReasonExtensionConflict,
			message: `"baseline"`},
		{name: "another extension writing another file", x: newExtension("site", 20, byOS, "/etc/site"),
			others:   []client.Object{newExtension("baseline", 10, osmv1alpha1.ProfileSelector{Names: []string{"osp-ubuntu"}}, "/etc/baseline")},
			profiles: []string{"osp-rhel", "osp-ubuntu"}, status: metav1.ConditionTrue, reason: osmv1alpha1.ReasonSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append(slices.Clone(profiles), tc.others...)
			c := newClient(nil, append(objs, tc.x.DeepCopy())...)
			r := &Reconciler{Client: c, Validator: &validation.ExtensionValidator{}}
			if res, err := r.Reconcile(context.Background(), request(tc.x.Name)); err != nil || res != (ctrl.Result{}) {
				t.Fatalf("Reconcile = %+v, %v", res, err)
			}
			got := &osmv1alpha1.OperatingSystemProfileExtension{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.x), got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Status.Profiles, tc.profiles) {
				t.Errorf("status.profiles = %q, want %q", got.Status.Profiles, tc.profiles)
			}
			if got.Status.ObservedGeneration != tc.x.Generation {
				t.Errorf("observedGeneration = %d, want %d", got.Status.ObservedGeneration, tc.x.Generation)
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, osmv1alpha1.ConditionReady)
			if cond == nil || cond.Status != tc.status || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.message) ||
				cond.ObservedGeneration != tc.x.Generation {
				t.Errorf("Ready = %+v, want %s/%s containing %q at generation %d", cond, tc.status, tc.reason, tc.message, tc.x.Generation)
			}
		})
	}
}

// TestReconcileWritesOnlyChanges: a reconcile that finds the status as it was writes nothing; one that finds a
// stale status (a profile added since) rewrites it; an extension that is gone or being deleted is no error.
func TestReconcileWritesOnlyChanges(t *testing.T) {
	updates := 0
	deleting := newExtension("deleting", 0, osmv1alpha1.ProfileSelector{OSNames: []osmv1alpha1.OperatingSystem{"ubuntu"}}, "/etc/d")
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	deleting.Finalizers = []string{"example.com/hold"}
	c := newClient(&interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		updates++
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}}, profile(ns, "osp-ubuntu", "ubuntu"), deleting,
		newExtension("site", 0, osmv1alpha1.ProfileSelector{OSNames: []osmv1alpha1.OperatingSystem{"ubuntu"}}, "/etc/site"))
	r := &Reconciler{Client: c, Validator: &validation.ExtensionValidator{}}
	reconcile := func(name string) {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), request(name)); err != nil {
			t.Fatal(err)
		}
	}

	reconcile("site")
	reconcile("site")
	if updates != 1 {
		t.Errorf("%d status updates after two reconciles of an unchanged extension, want 1", updates)
	}
	if err := c.Create(context.Background(), profile(ns, "osp-ubuntu-2", "ubuntu")); err != nil {
		t.Fatal(err)
	}
	reconcile("site")
	got := &osmv1alpha1.OperatingSystemProfileExtension{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "site"}, got); err != nil {
		t.Fatal(err)
	}
	if want := []string{"osp-ubuntu", "osp-ubuntu-2"}; updates != 2 || !slices.Equal(got.Status.Profiles, want) {
		t.Errorf("after a new profile: %d updates, status.profiles %q; want 2 and %q", updates, got.Status.Profiles, want)
	}
	reconcile("gone")
	reconcile("deleting")
	if updates != 2 {
		t.Errorf("%d status updates, want none for a missing or deleting extension", updates-2)
	}
}

// TestReconcileListFailure: a failure to list the namespace's profiles or extensions is returned, so the
// request is retried, and no status is written.
func TestReconcileListFailure(t *testing.T) {
	for _, kind := range []string{"profiles", "extensions"} {
		t.Run(kind, func(t *testing.T) {
			c := newClient(&interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					_, profiles := list.(*osmv1alpha1.OperatingSystemProfileList)
					if profiles == (kind == "profiles") {
						return errors.New("apiserver unavailable")
					}
					return c.List(ctx, list, opts...)
				},
				SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
					t.Error("status written")
					return nil
				},
			}, newExtension("site", 0, osmv1alpha1.ProfileSelector{}, "/etc/site"))
			r := &Reconciler{Client: c, Validator: &validation.ExtensionValidator{}}
			if _, err := r.Reconcile(context.Background(), request("site")); err == nil || err.Error() != "apiserver unavailable" {
				t.Errorf("error = %v, want the list failure", err)
			}
		})
	}
}

// TestExtensionsOfNamespace: a change to a profile or an extension re-checks every extension of its namespace.
func TestExtensionsOfNamespace(t *testing.T) {
	other := newExtension("elsewhere", 0, osmv1alpha1.ProfileSelector{}, "/etc/x")
	other.Namespace = "team-b"
	c := newClient(nil, newExtension("a", 0, osmv1alpha1.ProfileSelector{}, "/etc/a"),
		newExtension("b", 0, osmv1alpha1.ProfileSelector{}, "/etc/b"), other)
	r := &Reconciler{Client: c}
	for _, tc := range []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"profile of the namespace", profile(ns, "osp-ubuntu", "ubuntu"), []string{"team-a/a", "team-a/b"}},
		{"extension of the namespace", newExtension("a", 0, osmv1alpha1.ProfileSelector{}, "/etc/a"), []string{"team-a/a", "team-a/b"}},
		{"profile of another namespace", profile("team-b", "osp-ubuntu", "ubuntu"), []string{"team-b/elsewhere"}},
		{"namespace without extensions", profile("team-c", "osp-ubuntu", "ubuntu"), []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []string{}
			for _, req := range r.extensionsOfNamespace(context.Background(), tc.obj) {
				got = append(got, req.String())
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("requests = %q, want %q", got, tc.want)
			}
		})
	}
}
