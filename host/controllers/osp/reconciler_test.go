package osp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/scheme"
	"github.com/osmhq/osm/sdk/abi"
)

const ns = "osm-system"

// profile is a valid templates-only profile (it passes validation.ProfileValidator.ValidateStructure).
func profile(namespace, name, version string) *osmv1alpha1.OperatingSystemProfile {
	return &osmv1alpha1.OperatingSystemProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: 1},
		Spec: osmv1alpha1.OperatingSystemProfileSpec{
			OSName: "ubuntu", OSVersion: "22.04", Version: version,
			SupportedCloudProviders: []osmv1alpha1.CloudProviderSpec{{Name: "aws"}},
			ProvisioningConfig: osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{{Path: "/etc/motd",
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "hello {{ .KubeVersion }}"}}}}},
		},
	}
}

// shipped is the default profile osp-ubuntu as this build ships it: a plugin profile at v2.
func shipped(version string) *osmv1alpha1.OperatingSystemProfile {
	osp := profile("", "osp-ubuntu", version)
	osp.Generation = 0
	osp.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "ubuntu"}
	return osp
}

func withLabel(osp *osmv1alpha1.OperatingSystemProfile, value string) *osmv1alpha1.OperatingSystemProfile {
	metav1.SetMetaDataLabel(&osp.ObjectMeta, LabelDefault, value)
	return osp
}

func newClient(funcs *interceptor.Funcs, objs ...client.Object) client.Client {
	b := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithStatusSubresource(&osmv1alpha1.OperatingSystemProfile{}).WithObjects(objs...)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return b.Build()
}

// events drains what the recorder holds.
func events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func get(t *testing.T, c client.Client, namespace, name string) *osmv1alpha1.OperatingSystemProfile {
	t.Helper()
	osp := &osmv1alpha1.OperatingSystemProfile{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, osp); err != nil {
		t.Fatal(err)
	}
	return osp
}

func TestInstallDefault(t *testing.T) {
	deleting := withLabel(profile(ns, "osp-ubuntu", "v1.0.0"), "true")
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	deleting.Finalizers = []string{"example.com/hold"}
	withPluginUnderUpstreamName := profile(ns, "osp-ubuntu", "v1.5.0")
	withPluginUnderUpstreamName.Spec.Plugin = &osmv1alpha1.PluginReference{Image: "registry.example/os:1"}
	adopted := withLabel(profile(ns, "osp-ubuntu", "v2.0.0"), "true")
	adopted.Spec.AllowedNamespaces = []string{"team-a", "team-b"}

	for _, tc := range []struct {
		name     string
		existing *osmv1alpha1.OperatingSystemProfile
		req      ctrl.Request
		// replaced says the profile must now hold the shipped spec and OSM's label.
		replaced bool
		// allowed is spec.allowedNamespaces the profile must keep.
		allowed []string
		// event is the start of the one event expected ("" for none).
		event string
	}{
		{name: "missing default is installed", req: request(ns, "osp-ubuntu"), replaced: true},
		{name: "older OSM default is upgraded, keeping allowedNamespaces", existing: adopted,
			req: request(ns, "osp-ubuntu"), replaced: true, allowed: []string{"team-a", "team-b"},
			event: "Normal DefaultProfileUpgraded upgraded from v2.0.0 to v2.1.0"},
		{name: "upstream default is taken over", existing: profile(ns, "osp-ubuntu", "v1.11.2"), req: request(ns, "osp-ubuntu"),
			replaced: true, event: "Normal DefaultProfileTakenOver upstream OSM's default profile v1.11.2 replaced by OSM's v2.1.0"},
		{name: "operator's profile under a default's name is kept although older", existing: profile(ns, "osp-ubuntu", "v2.0.0"),
			req: request(ns, "osp-ubuntu")},
		{name: "operator's profile at v0 under a default's name is kept", existing: profile(ns, "osp-ubuntu", "v0.1.0"), req: request(ns, "osp-ubuntu")},
		{name: "operator's plugin profile under an upstream name is kept", existing: withPluginUnderUpstreamName, req: request(ns, "osp-ubuntu")},
		{name: "label other than true is not OSM's", existing: withLabel(profile(ns, "osp-ubuntu", "v2.0.0"), "false"), req: request(ns, "osp-ubuntu")},
		{name: "equal version is left alone", existing: withLabel(profile(ns, "osp-ubuntu", "v2.1.0"), "true"), req: request(ns, "osp-ubuntu")},
		{name: "newer version is left alone", existing: withLabel(profile(ns, "osp-ubuntu", "v3.0.0"), "true"), req: request(ns, "osp-ubuntu")},
		{name: "malformed version is left alone", existing: withLabel(profile(ns, "osp-ubuntu", "latest"), "true"), req: request(ns, "osp-ubuntu")},
		{name: "profile being deleted is left alone", existing: deleting, req: request(ns, "osp-ubuntu")},
		{name: "other namespace is not the defaults'", req: request("team-a", "osp-ubuntu")},
		{name: "name not shipped", req: request(ns, "osp-custom")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			var before *osmv1alpha1.OperatingSystemProfile
			if tc.existing != nil {
				before = tc.existing.DeepCopy()
				objs = append(objs, before.DeepCopy())
			}
			c := newClient(nil, objs...)
			rec := record.NewFakeRecorder(10)
			r := &Reconciler{Client: c, Recorder: rec, Namespace: ns,
				Defaults: []*osmv1alpha1.OperatingSystemProfile{shipped("v2.1.0"), shipped("v2.1.0")}}
			r.Defaults[1].Name = "osp-flatcar"

			if err := r.installDefault(context.Background(), tc.req); err != nil {
				t.Fatalf("installDefault: %v", err)
			}

			got := &osmv1alpha1.OperatingSystemProfile{}
			err := c.Get(context.Background(), tc.req.NamespacedName, got)
			switch {
			case tc.replaced:
				if err != nil {
					t.Fatal(err)
				}
				want := shipped("v2.1.0").Spec
				want.AllowedNamespaces = tc.allowed
				if !equalJSON(t, got.Spec, want) {
					t.Errorf("spec = %+v, want the shipped one with allowedNamespaces %v", got.Spec, tc.allowed)
				}
				if got.Labels[LabelDefault] != "true" {
					t.Errorf("labels = %v, want %s=true", got.Labels, LabelDefault)
				}
			case before == nil:
				if !apierrors.IsNotFound(err) {
					t.Errorf("Get = %v, want nothing installed", err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if !equalJSON(t, got.Spec, before.Spec) || !equalJSON(t, got.Labels, before.Labels) {
					t.Errorf("profile changed to %+v (labels %v), want it left alone", got.Spec, got.Labels)
				}
			}
			evs := events(rec)
			if tc.event == "" && len(evs) > 0 || tc.event != "" && (len(evs) != 1 || !strings.HasPrefix(evs[0], tc.event)) {
				t.Errorf("events = %q, want one starting %q", evs, tc.event)
			}
		})
	}
}

// equalJSON compares values as the API server stores them.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(ja) == string(jb)
}

func request(namespace, name string) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKey{Namespace: namespace, Name: name}}
}

// TestInstallDefaultCreateFailure: another replica installing the same default between the Get and the
// Create is success, not an error; any other failure is reported.
func TestInstallDefaultCreateFailure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantErr string
	}{
		{"already exists", apierrors.NewAlreadyExists(schema.GroupResource{Resource: "operatingsystemprofiles"}, "osp-ubuntu"), ""},
		{"webhook not answering", errors.New("connection refused"), "installing default profile osp-ubuntu: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(&interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
				return tc.err
			}})
			r := &Reconciler{Client: c, Recorder: record.NewFakeRecorder(10), Namespace: ns,
				Defaults: []*osmv1alpha1.OperatingSystemProfile{shipped("v2.1.0")}}
			err := r.installDefault(context.Background(), request(ns, "osp-ubuntu"))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestUpstreamDefault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*osmv1alpha1.OperatingSystemProfile)
		want   bool
	}{
		{"upstream's ubuntu at its release version", func(*osmv1alpha1.OperatingSystemProfile) {}, true},
		{"first v1 release", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.Version = "v1.0.0" }, true},
		{"a name only older upstream releases used", func(o *osmv1alpha1.OperatingSystemProfile) { o.Name = "osp-centos" }, true},
		{"flatcar cloud-init", func(o *osmv1alpha1.OperatingSystemProfile) { o.Name = "osp-flatcar-cloud-init" }, true},
		{"not one of upstream's names", func(o *osmv1alpha1.OperatingSystemProfile) { o.Name = "osp-debian" }, false},
		{"OSM's label", func(o *osmv1alpha1.OperatingSystemProfile) { withLabel(o, "true") }, false},
		{"OSM's label with any value", func(o *osmv1alpha1.OperatingSystemProfile) { withLabel(o, "false") }, false},
		{"a plugin", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "ubuntu"}
		}, false},
		{"extra plugins", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.Plugins = []osmv1alpha1.PluginReference{{Builtin: "site"}}
		}, false},
		{"v2", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.Version = "v2.0.0" }, false},
		{"v0", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.Version = "v0.9.0" }, false},
		{"not a version", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.Version = "latest" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			osp := profile(ns, "osp-ubuntu", "v1.11.2")
			tc.mutate(osp)
			if got := UpstreamDefault(osp); got != tc.want {
				t.Errorf("UpstreamDefault = %v, want %v", got, tc.want)
			}
		})
	}
}

// fakePlugin is a loaded plugin; only its metadata and identity are used here.
type fakePlugin struct {
	md abi.Metadata
	id osmv1alpha1.ResolvedPlugin
}

func (p fakePlugin) Metadata() abi.Metadata               { return p.md }
func (p fakePlugin) Identity() osmv1alpha1.ResolvedPlugin { return p.id }
func (fakePlugin) Render(context.Context, *abi.RenderRequest) (*abi.RenderResponse, error) {
	return nil, errors.New("not used")
}
func (fakePlugin) Encode(context.Context, *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	return nil, errors.New("not used")
}

// source is a render.PluginSource that loads plugins (Resolve only).
type source struct {
	plugin fakePlugin
	err    error
}

func (s *source) Resolve(context.Context, string, *osmv1alpha1.PluginReference) (render.Plugin, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.plugin, nil
}

// identifier is a source that also names plugins without loading them (render.PluginIdentifier); md is nil
// for a plugin not loaded yet. Resolve must not be called.
type identifier struct {
	id  osmv1alpha1.ResolvedPlugin
	md  *abi.Metadata
	err error
}

func (s *identifier) Resolve(context.Context, string, *osmv1alpha1.PluginReference) (render.Plugin, error) {
	return nil, errors.New("resolve called: the reconciler must identify without loading")
}

func (s *identifier) Identify(context.Context, string, *osmv1alpha1.PluginReference) (osmv1alpha1.ResolvedPlugin, *abi.Metadata, error) {
	return s.id, s.md, s.err
}

var (
	ubuntuMD = abi.Metadata{Name: "ubuntu", Version: "1.2.3",
		OperatingSystems: []abi.OperatingSystem{{Name: "ubuntu", Versions: []string{"22.04", "24.04"}}}}
	flatcarMD = abi.Metadata{Name: "flatcar", Version: "1.0.0", OperatingSystems: []abi.OperatingSystem{{Name: "flatcar"}}}
	ubuntuID  = osmv1alpha1.ResolvedPlugin{Name: "ubuntu", Version: "1.2.3", Source: "builtin", Digest: "sha256:aaaa"}
)

func withBuiltin(osp *osmv1alpha1.OperatingSystemProfile) *osmv1alpha1.OperatingSystemProfile {
	osp.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "ubuntu"}
	return osp
}

type condition struct {
	status  metav1.ConditionStatus
	reason  string
	message string // a substring
}

// TestReconcileConditions: what Reconcile writes in a profile's status for each outcome of resolving its plugin.
func TestReconcileConditions(t *testing.T) {
	stale := profile("team-a", "custom", "v1.0.0")
	stale.Status.Plugin = &ubuntuID
	meta.SetStatusCondition(&stale.Status.Conditions, metav1.Condition{Type: osmv1alpha1.ConditionPluginResolved,
		Status: metav1.ConditionTrue, Reason: osmv1alpha1.ReasonSucceeded})
	broken := profile("team-a", "custom", "1.0")
	broken.Spec.ProvisioningConfig.Files[0].Path = "etc/motd"
	ubuntu25 := withBuiltin(profile("team-a", "custom", "v1.0.0"))
	ubuntu25.Spec.OSVersion = "25.04"

	for _, tc := range []struct {
		name     string
		osp      *osmv1alpha1.OperatingSystemProfile
		plugins  render.PluginSource
		ready    condition
		resolved *condition // nil: no PluginResolved condition
		plugin   *osmv1alpha1.ResolvedPlugin
		requeue  bool
		event    string // the one Warning event expected, "" for none
	}{
		{name: "templates only is ready and drops a former plugin", osp: stale,
			ready: condition{metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "templates-only profile"}},
		{name: "plugin resolved by loading it", osp: withBuiltin(profile("team-a", "custom", "v1.0.0")),
			plugins:  &source{plugin: fakePlugin{md: ubuntuMD, id: ubuntuID}},
			ready:    condition{metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "profile can render"},
			resolved: &condition{metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "plugin ubuntu 1.2.3 resolved to sha256:aaaa"},
			plugin:   &ubuntuID},
		{name: "plugin identified, loaded before", osp: withBuiltin(profile("team-a", "custom", "v1.0.0")),
			plugins:  &identifier{id: ubuntuID, md: &ubuntuMD},
			ready:    condition{metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "profile can render"},
			resolved: &condition{metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "plugin ubuntu 1.2.3 resolved to sha256:aaaa"},
			plugin:   &ubuntuID},
		{name: "plugin identified, not loaded yet: ready, looked at again", osp: withBuiltin(profile("team-a", "custom", "v1.0.0")),
			plugins:  &identifier{id: ubuntuID},
			ready:    condition{metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "profile can render"},
			resolved: &condition{metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "plugin ubuntu resolved to sha256:aaaa"},
			plugin:   &ubuntuID, requeue: true},
		{name: "plugin error carries its reason", osp: withBuiltin(profile("team-a", "custom", "v1.0.0")),
			plugins:  &source{err: &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: errors.New("pulling\n   registry.example/os:1:\tdenied")}},
			ready:    condition{metav1.ConditionFalse, osmv1alpha1.ReasonPluginPullFailed, "pulling registry.example/os:1: denied"},
			resolved: &condition{metav1.ConditionFalse, osmv1alpha1.ReasonPluginPullFailed, "pulling registry.example/os:1: denied"},
			event:    "Warning PluginPullFailed pulling registry.example/os:1: denied"},
		{name: "identify error carries its reason", osp: withBuiltin(profile("team-a", "custom", "v1.0.0")),
			plugins:  &identifier{err: &render.Error{Reason: osmv1alpha1.ReasonPluginNotFound, Err: errors.New(`no built-in plugin "ubuntu"`)}},
			ready:    condition{metav1.ConditionFalse, osmv1alpha1.ReasonPluginNotFound, `no built-in plugin "ubuntu"`},
			resolved: &condition{metav1.ConditionFalse, osmv1alpha1.ReasonPluginNotFound, `no built-in plugin "ubuntu"`},
			event:    "Warning PluginNotFound"},
		{name: "plugin error without a reason", osp: withBuiltin(profile("team-a", "custom", "v1.0.0")),
			plugins:  &source{err: errors.New("boom")},
			ready:    condition{metav1.ConditionFalse, osmv1alpha1.ReasonRenderFailed, "boom"},
			resolved: &condition{metav1.ConditionFalse, osmv1alpha1.ReasonRenderFailed, "boom"},
			event:    "Warning RenderFailed boom"},
		{name: "plugin does not support the OS", osp: withBuiltin(profile("team-a", "custom", "v1.0.0")),
			plugins:  &source{plugin: fakePlugin{md: flatcarMD, id: ubuntuID}},
			ready:    condition{metav1.ConditionFalse, osmv1alpha1.ReasonUnsupported, `plugin "flatcar" does not support ubuntu 22.04`},
			resolved: &condition{metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "resolved to sha256:aaaa"},
			plugin:   &ubuntuID},
		{name: "plugin does not support the OS version", osp: ubuntu25,
			plugins:  &identifier{id: ubuntuID, md: &ubuntuMD},
			ready:    condition{metav1.ConditionFalse, osmv1alpha1.ReasonUnsupported, `plugin "ubuntu" does not support ubuntu 25.04`},
			resolved: &condition{metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "resolved to sha256:aaaa"},
			plugin:   &ubuntuID},
		{name: "structure errors", osp: broken, plugins: &source{err: errors.New("must not be called")},
			ready: condition{metav1.ConditionFalse, osmv1alpha1.ReasonTemplateError, "spec.version"},
			event: "Warning TemplateError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(nil, tc.osp.DeepCopy())
			rec := record.NewFakeRecorder(10)
			r := &Reconciler{Client: c, Plugins: tc.plugins, Recorder: rec, Namespace: ns}

			result, err := r.Reconcile(context.Background(), request(tc.osp.Namespace, tc.osp.Name))
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if want := map[bool]ctrl.Result{true: {RequeueAfter: metadataRecheck}}[tc.requeue]; result != want {
				t.Errorf("result = %+v, want %+v", result, want)
			}
			got := get(t, c, tc.osp.Namespace, tc.osp.Name)
			checkCondition(t, got, osmv1alpha1.ConditionReady, &tc.ready)
			checkCondition(t, got, osmv1alpha1.ConditionPluginResolved, tc.resolved)
			if got.Status.ObservedGeneration != tc.osp.Generation {
				t.Errorf("observedGeneration = %d, want %d", got.Status.ObservedGeneration, tc.osp.Generation)
			}
			if !equalJSON(t, got.Status.Plugin, tc.plugin) {
				t.Errorf("status.plugin = %+v, want %+v", got.Status.Plugin, tc.plugin)
			}
			evs := events(rec)
			if tc.event == "" && len(evs) > 0 || tc.event != "" && (len(evs) != 1 || !strings.HasPrefix(evs[0], tc.event)) {
				t.Errorf("events = %q, want one starting %q", evs, tc.event)
			}
		})
	}
}

func checkCondition(t *testing.T, osp *osmv1alpha1.OperatingSystemProfile, typ string, want *condition) {
	t.Helper()
	got := meta.FindStatusCondition(osp.Status.Conditions, typ)
	switch {
	case want == nil && got != nil:
		t.Errorf("%s = %+v, want none", typ, got)
	case want == nil:
	case got == nil:
		t.Errorf("no %s condition, want %+v", typ, *want)
	case got.Status != want.status || got.Reason != want.reason || !strings.Contains(got.Message, want.message) ||
		got.ObservedGeneration != osp.Generation:
		t.Errorf("%s = %s/%s %q (generation %d), want %s/%s containing %q (generation %d)", typ, got.Status, got.Reason,
			got.Message, got.ObservedGeneration, want.status, want.reason, want.message, osp.Generation)
	}
}

// TestNotLoadedYet: only a built-in plugin that an identifier names without metadata is looked at again.
func TestNotLoadedYet(t *testing.T) {
	image := profile("team-a", "custom", "v1.0.0")
	image.Spec.Plugin = &osmv1alpha1.PluginReference{Image: "registry.example/os:1"}
	for _, tc := range []struct {
		name    string
		osp     *osmv1alpha1.OperatingSystemProfile
		plugins render.PluginSource
		want    bool
	}{
		{"built-in not loaded yet", withBuiltin(profile("team-a", "custom", "v1.0.0")), &identifier{id: ubuntuID}, true},
		{"built-in loaded", withBuiltin(profile("team-a", "custom", "v1.0.0")), &identifier{id: ubuntuID, md: &ubuntuMD}, false},
		{"built-in that does not resolve", withBuiltin(profile("team-a", "custom", "v1.0.0")), &identifier{err: errors.New("unknown")}, false},
		{"image not pulled yet", image, &identifier{id: ubuntuID}, false},
		{"templates only", profile("team-a", "custom", "v1.0.0"), &identifier{id: ubuntuID}, false},
		{"source that cannot identify", withBuiltin(profile("team-a", "custom", "v1.0.0")), &source{plugin: fakePlugin{md: ubuntuMD, id: ubuntuID}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{Plugins: tc.plugins, Recorder: record.NewFakeRecorder(10)}
			r.resolve(context.Background(), tc.osp)
			if got := r.notLoadedYet(context.Background(), tc.osp); got != tc.want {
				t.Errorf("notLoadedYet = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReconcileWritesOnlyChanges: a second reconcile of an unchanged profile writes no status, and a profile
// that is gone or being deleted is not an error.
func TestReconcileWritesOnlyChanges(t *testing.T) {
	var updates int
	deleting := profile("team-a", "deleting", "1.0") // invalid: a reconcile would set TemplateError
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	deleting.Finalizers = []string{"example.com/hold"}
	c := newClient(&interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		updates++
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}}, profile("team-a", "custom", "v1.0.0"), deleting)
	r := &Reconciler{Client: c, Recorder: record.NewFakeRecorder(10), Namespace: ns}
	for i, want := range []int{1, 1} {
		if _, err := r.Reconcile(context.Background(), request("team-a", "custom")); err != nil {
			t.Fatal(err)
		}
		if updates != want {
			t.Errorf("reconcile %d: %d status updates in all, want %d", i+1, updates, want)
		}
	}
	for _, name := range []string{"gone", "deleting"} {
		if _, err := r.Reconcile(context.Background(), request("team-a", name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if updates != 1 {
		t.Errorf("%d status updates, want none for a missing or deleting profile", updates-1)
	}
	if got := get(t, c, "team-a", "deleting"); len(got.Status.Conditions) > 0 {
		t.Errorf("deleting profile got conditions %+v", got.Status.Conditions)
	}
}

// TestReconcileInstallsDefault: a reconcile of a default profile that was deleted installs it and reports it.
func TestReconcileInstallsDefault(t *testing.T) {
	c := newClient(nil)
	r := &Reconciler{Client: c, Recorder: record.NewFakeRecorder(10), Namespace: ns,
		Plugins:  &identifier{id: ubuntuID, md: &ubuntuMD},
		Defaults: []*osmv1alpha1.OperatingSystemProfile{shipped("v2.1.0")}}
	if _, err := r.Reconcile(context.Background(), request(ns, "osp-ubuntu")); err != nil {
		t.Fatal(err)
	}
	got := get(t, c, ns, "osp-ubuntu")
	checkCondition(t, got, osmv1alpha1.ConditionReady, &condition{metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "profile can render"})
	if got.Labels[LabelDefault] != "true" || got.Spec.Version != "v2.1.0" {
		t.Errorf("installed %s with labels %v, want v2.1.0 labelled as a default", got.Spec.Version, got.Labels)
	}
}

// failingCreates is a client whose Create fails for the named profiles until each has failed the given number
// of times; it counts the attempts per profile.
type failingCreates struct {
	mu       sync.Mutex
	fails    map[string]int
	attempts map[string]int
	// onFail runs after each failure (outside the lock).
	onFail func()
}

func (f *failingCreates) create(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	f.mu.Lock()
	f.attempts[obj.GetName()]++
	fail := f.fails[obj.GetName()] > 0
	if fail {
		f.fails[obj.GetName()]--
	}
	f.mu.Unlock()
	if fail {
		if f.onFail != nil {
			f.onFail()
		}
		return apierrors.NewServiceUnavailable("admission webhook not ready")
	}
	return c.Create(ctx, obj, opts...)
}

func TestInstallDefaults(t *testing.T) {
	defaults := func() []*osmv1alpha1.OperatingSystemProfile {
		flatcar := shipped("v2.1.0")
		flatcar.Name = "osp-flatcar"
		return []*osmv1alpha1.OperatingSystemProfile{shipped("v2.1.0"), flatcar}
	}

	t.Run("retries the failed ones until all are installed", func(t *testing.T) {
		f := &failingCreates{fails: map[string]int{"osp-flatcar": 2}, attempts: map[string]int{}}
		c := newClient(&interceptor.Funcs{Create: f.create})
		r := &Reconciler{Client: c, Recorder: record.NewFakeRecorder(10), Namespace: ns, Defaults: defaults()}
		if err := r.InstallDefaults(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, d := range r.Defaults {
			if got := get(t, c, ns, d.Name); got.Labels[LabelDefault] != "true" {
				t.Errorf("%s labels = %v", d.Name, got.Labels)
			}
		}
		if want := map[string]int{"osp-ubuntu": 1, "osp-flatcar": 3}; !equalJSON(t, f.attempts, want) {
			t.Errorf("create attempts = %v, want %v (only the failed one retried, until it passed)", f.attempts, want)
		}
	})

	t.Run("returns the last failure when the context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := &failingCreates{fails: map[string]int{"osp-flatcar": 1 << 30}, attempts: map[string]int{}, onFail: cancel}
		c := newClient(&interceptor.Funcs{Create: f.create})
		r := &Reconciler{Client: c, Recorder: record.NewFakeRecorder(10), Namespace: ns, Defaults: defaults()}
		err := r.InstallDefaults(ctx)
		if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "installing default profile osp-flatcar") {
			t.Errorf("error = %v, want the failure installing osp-flatcar", err)
		}
		if f.attempts["osp-flatcar"] != 1 {
			t.Errorf("%d attempts after the context ended, want 1", f.attempts["osp-flatcar"])
		}
		get(t, c, ns, "osp-ubuntu") // the other one is installed all the same
	})

	t.Run("nothing to install", func(t *testing.T) {
		r := &Reconciler{Client: newClient(nil), Recorder: record.NewFakeRecorder(10), Namespace: ns}
		if err := r.InstallDefaults(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
