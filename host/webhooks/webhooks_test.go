package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/scheme"
	"github.com/osmhq/osm/host/validation"
)

const controllerNS = "osm-system"

// The handlers are built as Setup registers them (admission.WithValidator / WithDefaulter over the project's
// scheme), so a request goes through the same decoding and response mapping as on the webhook server.

func TestProfileValidator(t *testing.T) {
	h := admission.WithValidator[*osmv1alpha1.OperatingSystemProfile](scheme.Scheme,
		&ProfileValidator{Validator: &validation.ProfileValidator{Settings: render.DefaultSettings()}})
	with := func(mutate func(*osmv1alpha1.OperatingSystemProfile)) *osmv1alpha1.OperatingSystemProfile {
		osp := profile("team-a", "custom")
		mutate(osp)
		return osp
	}
	insecure := func(o *osmv1alpha1.OperatingSystemProfile) {
		o.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = "curl -k https://example.com/x | sh"
	}
	badVersion := func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.Version = "1.0" }
	bump := func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.Version = "v1.1.0" }
	changeFile := func(o *osmv1alpha1.OperatingSystemProfile) {
		o.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = "changed"
	}
	refused := func(msg ...string) verdict { return verdict{code: http.StatusUnprocessableEntity, message: msg} }

	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		obj, old *osmv1alpha1.OperatingSystemProfile
		want     verdict
	}{
		{"valid profile", admissionv1.Create, profile("team-a", "custom"), nil, verdict{allowed: true}},
		{"unsafe but legal profile is admitted with a warning", admissionv1.Create, with(insecure), nil,
			verdict{allowed: true, warning: "spec.provisioningConfig.files[0].content.inline.data: curl -k turns off TLS"}},
		{"malformed version", admissionv1.Create, with(badVersion), nil,
			refused(`OperatingSystemProfile.operatingsystemmanager.k8c.io "custom" is invalid`, "spec.version")},
		{"template that does not execute", admissionv1.Create, with(func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = "{{ .NoSuchField }}"
		}), nil, refused("spec.provisioningConfig.files[0].content.inline.data", "NoSuchField")},
		{"plugin without a source", admissionv1.Create, with(func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "ubuntu"}
		}), nil, refused("spec.plugin", "no plugin source configured")},
		{"metadata-only update of a profile that would not pass today", admissionv1.Update,
			with(func(o *osmv1alpha1.OperatingSystemProfile) { badVersion(o); o.Labels = map[string]string{"x": "y"} }),
			with(badVersion), verdict{allowed: true}},
		{"spec change without a version bump", admissionv1.Update, with(changeFile), profile("team-a", "custom"),
			refused("spec.version", "must be raised above v1.0.0")},
		{"version going down", admissionv1.Update, profile("team-a", "custom"), with(bump),
			refused("spec.version", "must not go down from v1.1.0")},
		{"spec change with a version bump", admissionv1.Update, with(func(o *osmv1alpha1.OperatingSystemProfile) { changeFile(o); bump(o) }),
			profile("team-a", "custom"), verdict{allowed: true}},
		{"allowedNamespaces change needs no bump", admissionv1.Update,
			with(func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.AllowedNamespaces = []string{"team-b"} }),
			profile("team-a", "custom"), verdict{allowed: true}},
		{"bumped update is reviewed too", admissionv1.Update, with(func(o *osmv1alpha1.OperatingSystemProfile) {
			bump(o)
			o.Spec.ProvisioningConfig.Files[0].Path = "etc/motd"
		}), profile("team-a", "custom"), refused("spec.provisioningConfig.files[0].path")},
		{"update warns too", admissionv1.Update, with(func(o *osmv1alpha1.OperatingSystemProfile) { insecure(o); bump(o) }),
			profile("team-a", "custom"), verdict{allowed: true, warning: "curl -k"}},
		{"delete", admissionv1.Delete, nil, with(badVersion), verdict{allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var obj, old client.Object
			if tc.obj != nil {
				obj = tc.obj
			}
			if tc.old != nil {
				old = tc.old
			}
			checkVerdict(t, review(t, h, tc.op, obj, old), tc.want)
		})
	}
}

func TestConfigValidator(t *testing.T) {
	h := admission.WithValidator[*osmv1alpha1.OperatingSystemConfig](scheme.Scheme, ConfigValidator{})
	osc := func(mutate func(*osmv1alpha1.OperatingSystemConfig)) *osmv1alpha1.OperatingSystemConfig {
		o := &osmv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "workers-osc-provisioning"},
			Spec: osmv1alpha1.OperatingSystemConfigSpec{OSName: "ubuntu", OSVersion: "22.04",
				CloudProvider: osmv1alpha1.CloudProviderSpec{Name: "aws"},
				ProvisioningConfig: osmv1alpha1.OSCConfig{Files: []osmv1alpha1.File{{Path: "/etc/motd",
					Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "hello"}}}}}}}
		mutate(o)
		return o
	}
	same := func(*osmv1alpha1.OperatingSystemConfig) {}
	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		obj, old *osmv1alpha1.OperatingSystemConfig
		want     verdict
	}{
		{"create", admissionv1.Create, osc(same), nil, verdict{allowed: true}},
		{"status and metadata change", admissionv1.Update, osc(func(o *osmv1alpha1.OperatingSystemConfig) {
			o.Labels = map[string]string{"x": "y"}
			o.Status.Profile = "osp-ubuntu"
		}), osc(same), verdict{allowed: true}},
		{"file content change", admissionv1.Update, osc(func(o *osmv1alpha1.OperatingSystemConfig) {
			o.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = "changed"
		}), osc(same), verdict{code: http.StatusUnprocessableEntity, message: []string{
			`OperatingSystemConfig.operatingsystemmanager.k8c.io "workers-osc-provisioning" is invalid`, "spec: Forbidden", "immutable"}}},
		{"cloud provider change", admissionv1.Update, osc(func(o *osmv1alpha1.OperatingSystemConfig) {
			o.Spec.CloudProvider.Name = "openstack"
		}), osc(same), verdict{code: http.StatusUnprocessableEntity, message: []string{"immutable"}}},
		{"delete", admissionv1.Delete, nil, osc(same), verdict{allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var obj, old client.Object
			if tc.obj != nil {
				obj = tc.obj
			}
			if tc.old != nil {
				old = tc.old
			}
			checkVerdict(t, review(t, h, tc.op, obj, old), tc.want)
		})
	}
}

func machineDeployment(annotations map[string]string, providerSpec string) *clusterv1alpha1.MachineDeployment {
	md := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workers", Annotations: annotations}}
	if providerSpec != "" {
		md.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(providerSpec)}
	}
	return md
}

// profileAnnotation is the k8c.io/operating-system-profile annotation after the response's patches: the
// request's value unless a patch sets it.
func profileAnnotation(t *testing.T, md *clusterv1alpha1.MachineDeployment, resp admission.Response) string {
	t.Helper()
	value := md.Annotations[clusterv1alpha1.AnnotationOSP]
	for _, p := range resp.Patches {
		switch {
		case p.Operation == "add" && p.Path == "/metadata/annotations":
			m, _ := p.Value.(map[string]any)
			value, _ = m[clusterv1alpha1.AnnotationOSP].(string)
		case (p.Operation == "add" || p.Operation == "replace") && p.Path == "/metadata/annotations/k8c.io~1operating-system-profile":
			value, _ = p.Value.(string)
		default:
			t.Errorf("unexpected patch %+v", p)
		}
	}
	return value
}

func TestMachineDeploymentDefaulter(t *testing.T) {
	ubuntu := `{"cloudProvider":"aws","operatingSystem":"ubuntu","operatingSystemSpec":{}}`
	ref := func(name, ns string) map[string]string {
		return map[string]string{clusterv1alpha1.AnnotationOSP: name, clusterv1alpha1.AnnotationOSPNamespace: ns}
	}
	private := profile("team-b", "osp-private") // no allowedNamespaces: team-b's own
	shared := profile("team-b", "osp-shared")
	shared.Spec.AllowedNamespaces = []string{"team-c", "team-a"}
	public := profile("team-b", "osp-public")
	public.Spec.AllowedNamespaces = []string{render.AllNamespaces}
	profiles := []client.Object{private, shared, public}
	notAllowed := verdict{code: http.StatusForbidden, message: []string{
		`machinedeployments.cluster.k8s.io "workers" is forbidden`, "annotation " + clusterv1alpha1.AnnotationOSPNamespace,
		"OperatingSystemProfile team-b/osp-private may not be used from namespace team-a", "reason ProfileNotAllowed"}}

	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		md, old  *clusterv1alpha1.MachineDeployment
		failRead bool // every read of a profile fails: the review must not read one
		noReader bool
		want     verdict
		profile  string // the annotation after the response's patches
	}{
		{name: "defaults the profile to the OS's", op: admissionv1.Create, md: machineDeployment(nil, ubuntu),
			want: verdict{allowed: true}, profile: "osp-ubuntu"},
		{name: "defaults on update", op: admissionv1.Update, md: machineDeployment(map[string]string{"x": "y"}, `{"operatingSystem":"flatcar"}`),
			old: machineDeployment(nil, `{"operatingSystem":"flatcar"}`), want: verdict{allowed: true}, profile: "osp-flatcar"},
		{name: "keeps a named profile", op: admissionv1.Create, md: machineDeployment(ref("osp-custom", ""), ubuntu),
			want: verdict{allowed: true}, profile: "osp-custom"},
		{name: "no provider spec", op: admissionv1.Create, md: machineDeployment(nil, ""), want: verdict{allowed: true}},
		{name: "provider spec without an OS", op: admissionv1.Create, md: machineDeployment(nil, `{"cloudProvider":"aws"}`),
			want: verdict{allowed: true}},
		{name: "provider spec of the wrong shape", op: admissionv1.Create, md: machineDeployment(nil, `{"operatingSystem":7}`),
			want: verdict{allowed: true}},
		{name: "profile of its own namespace is not read", op: admissionv1.Create, md: machineDeployment(ref("osp-x", "team-a"), ubuntu),
			failRead: true, want: verdict{allowed: true}, profile: "osp-x"},
		{name: "profile of the controller's namespace is not read", op: admissionv1.Create,
			md: machineDeployment(ref("osp-x", controllerNS), ubuntu), failRead: true, want: verdict{allowed: true}, profile: "osp-x"},
		{name: "profile of another namespace not allowing it", op: admissionv1.Create,
			md: machineDeployment(ref("osp-private", "team-b"), ubuntu), want: notAllowed},
		{name: "profile of another namespace listing it", op: admissionv1.Create,
			md: machineDeployment(ref("osp-shared", "team-b"), ubuntu), want: verdict{allowed: true}, profile: "osp-shared"},
		{name: "profile of another namespace allowing all", op: admissionv1.Create,
			md: machineDeployment(ref("osp-public", "team-b"), ubuntu), want: verdict{allowed: true}, profile: "osp-public"},
		{name: "profile of another namespace that does not exist yet", op: admissionv1.Create,
			md: machineDeployment(ref("osp-later", "team-b"), ubuntu), want: verdict{allowed: true}, profile: "osp-later"},
		{name: "update keeping the reference", op: admissionv1.Update,
			md:  machineDeployment(map[string]string{clusterv1alpha1.AnnotationOSP: "osp-private", clusterv1alpha1.AnnotationOSPNamespace: "team-b", "scaled": "1"}, ubuntu),
			old: machineDeployment(ref("osp-private", "team-b"), ubuntu), failRead: true, want: verdict{allowed: true}, profile: "osp-private"},
		{name: "update changing the namespace", op: admissionv1.Update, md: machineDeployment(ref("osp-private", "team-b"), ubuntu),
			old: machineDeployment(ref("osp-private", controllerNS), ubuntu), want: notAllowed},
		{name: "update changing the name", op: admissionv1.Update, md: machineDeployment(ref("osp-private", "team-b"), ubuntu),
			old: machineDeployment(ref("osp-shared", "team-b"), ubuntu), want: notAllowed},
		{name: "update adding the reference", op: admissionv1.Update, md: machineDeployment(ref("osp-private", "team-b"), ubuntu),
			old: machineDeployment(nil, ubuntu), want: notAllowed},
		{name: "profile that cannot be read", op: admissionv1.Create, md: machineDeployment(ref("osp-shared", "team-b"), ubuntu),
			failRead: true, want: verdict{code: http.StatusForbidden, message: []string{
				"reading OperatingSystemProfile team-b/osp-shared to check that namespace team-a may use it: apiserver unavailable"}}},
		{name: "without a reader nothing is refused", op: admissionv1.Create, md: machineDeployment(ref("osp-private", "team-b"), ubuntu),
			noReader: true, want: verdict{allowed: true}, profile: "osp-private"},
		{name: "delete", op: admissionv1.Delete, old: machineDeployment(ref("osp-private", "team-b"), ubuntu), want: verdict{allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := MachineDeploymentDefaulter{Profiles: reader(tc.failRead, profiles...), Namespace: controllerNS}
			if tc.noReader {
				d.Profiles = nil
			}
			h := admission.WithDefaulter[*clusterv1alpha1.MachineDeployment](scheme.Scheme, d)
			var obj, old client.Object
			if tc.md != nil {
				obj = tc.md
			}
			if tc.old != nil {
				old = tc.old
			}
			resp := review(t, h, tc.op, obj, old)
			checkVerdict(t, resp, tc.want)
			if !tc.want.allowed || tc.md == nil {
				if len(resp.Patches) > 0 {
					t.Errorf("patches %+v on a refusal or delete", resp.Patches)
				}
				return
			}
			if got := profileAnnotation(t, tc.md, resp); got != tc.profile {
				t.Errorf("%s = %q, want %q", clusterv1alpha1.AnnotationOSP, got, tc.profile)
			}
		})
	}
}

// TestDefaulterKeepsTheRestOfTheObject: the patch touches the profile annotation only, so fields OSM's types do
// not know (a newer machine-controller's) survive defaulting.
func TestDefaulterKeepsTheRestOfTheObject(t *testing.T) {
	h := admission.WithDefaulter[*clusterv1alpha1.MachineDeployment](scheme.Scheme, MachineDeploymentDefaulter{Namespace: controllerNS})
	md := machineDeployment(map[string]string{"keep": "me"}, `{"operatingSystem":"rhel","futureField":{"a":1}}`)
	obj := raw(t, md)
	var m map[string]any
	if err := json.Unmarshal(obj.Raw, &m); err != nil {
		t.Fatal(err)
	}
	m["spec"].(map[string]any)["unknownToOSM"] = true
	obj.Raw, _ = json.Marshal(m)
	resp := h.Handle(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: obj}})
	if !resp.Allowed || len(resp.Patches) != 1 || resp.Patches[0].Path != "/metadata/annotations/k8c.io~1operating-system-profile" ||
		resp.Patches[0].Value != "osp-rhel" {
		t.Errorf("response allowed %v, patches %+v; want the one annotation added", resp.Allowed, resp.Patches)
	}
}

func TestWarmupCheck(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	for _, tc := range []struct {
		name    string
		done    chan struct{}
		started time.Time
		ready   bool
	}{
		{"plugins loaded", closed, time.Now(), true},
		{"still loading", make(chan struct{}), time.Now(), false},
		{"still loading past WarmWait", make(chan struct{}), time.Now().Add(-WarmWait - time.Minute), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &warmup{done: tc.done, started: tc.started}
			err := w.check(nil)
			if (err == nil) != tc.ready || err != nil && !strings.Contains(err.Error(), "loading the default profiles' plugins") {
				t.Errorf("check = %v, want ready %v", err, tc.ready)
			}
		})
	}
}

// TestWarmupStart: the manager's runnable loads the shipped profiles' plugins in the background, reports ready
// when done, and returns when the manager stops.
func TestWarmupStart(t *testing.T) {
	w := &warmup{validator: &validation.ProfileValidator{}, done: make(chan struct{}), started: time.Now()}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error)
	go func() { stopped <- w.Start(ctx) }()
	<-w.done // a validator without plugins has nothing to load
	if err := w.check(nil); err != nil {
		t.Errorf("check after loading = %v", err)
	}
	if w.NeedLeaderElection() {
		t.Error("warm-up needs leader election; every replica serves admission")
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Errorf("Start = %v", err)
	}
}

// TestSetupServesEveryPath: Setup and SetupExtensions register each webhook on OSM's path and, for those
// upstream OSM has, on upstream's path too, so that an upstream installation's webhook configurations keep
// working; and they bound the reviews' wait for a plugin.
func TestSetupServesEveryPath(t *testing.T) {
	mgr, err := manager.New(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{Scheme: scheme.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	profiles := &validation.ProfileValidator{Settings: render.DefaultSettings()}
	extensions := &validation.ExtensionValidator{PluginWait: time.Second}
	if err := Setup(mgr, profiles); err != nil {
		t.Fatal(err)
	}
	if err := SetupExtensions(mgr, reader(false), extensions); err != nil {
		t.Fatal(err)
	}
	if profiles.PluginWait != validation.AdmissionPluginWait || extensions.PluginWait != time.Second {
		t.Errorf("plugin waits %s and %s, want the default %s for profiles and the one set (1s) for extensions",
			profiles.PluginWait, extensions.PluginWait, validation.AdmissionPluginWait)
	}

	badProfile := profile("team-a", "custom")
	badProfile.Spec.Version = "1.0"
	osc := &osmv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "osc"}}
	changed := osc.DeepCopy()
	changed.Spec.OSName = "flatcar"
	md := machineDeployment(nil, `{"operatingSystem":"ubuntu"}`)
	badExtension := &osmv1alpha1.OperatingSystemProfileExtension{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x"},
		Spec: osmv1alpha1.OperatingSystemProfileExtensionSpec{ProvisioningConfig: &osmv1alpha1.ExtensionConfig{Overrides: []string{""}}}}
	for _, tc := range []struct {
		paths    []string
		op       admissionv1.Operation
		obj, old client.Object
		allowed  bool
		patch    string // a substring of the JSON patch
		message  string // a substring of a refusal's message
	}{
		{[]string{PathValidateProfile, UpstreamPathValidateProfile}, admissionv1.Create, badProfile, nil, false, "",
			`OperatingSystemProfile.operatingsystemmanager.k8c.io "custom" is invalid: spec.version`},
		{[]string{PathValidateConfig, UpstreamPathValidateConfig}, admissionv1.Update, changed, osc, false, "",
			`OperatingSystemConfig.operatingsystemmanager.k8c.io "osc" is invalid: spec: Forbidden`},
		{[]string{PathDefaultMachineDeployment, UpstreamPathDefaultMachineDeployment}, admissionv1.Create, md, nil, true, `"osp-ubuntu"`, ""},
		{[]string{PathValidateExtension}, admissionv1.Create, badExtension, nil, false, "",
			`OperatingSystemProfileExtension.operatingsystemmanager.k8c.io "x" is invalid: spec.provisioningConfig.overrides[0]`},
	} {
		for _, path := range tc.paths {
			t.Run(path, func(t *testing.T) {
				ar := admissionv1.AdmissionReview{
					TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
					Request:  &admissionv1.AdmissionRequest{UID: "uid-1", Operation: tc.op, Object: raw(t, tc.obj)},
				}
				if tc.old != nil {
					ar.Request.OldObject = raw(t, tc.old)
				}
				body, _ := json.Marshal(ar)
				req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				mgr.GetWebhookServer().WebhookMux().ServeHTTP(rec, req)
				var got admissionv1.AdmissionReview
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Response == nil {
					t.Fatalf("status %d, body %q: %v", rec.Code, rec.Body.String(), err)
				}
				message := ""
				if got.Response.Result != nil {
					message = got.Response.Result.Message
				}
				if got.Response.UID != "uid-1" || got.Response.Allowed != tc.allowed || !strings.Contains(string(got.Response.Patch), tc.patch) ||
					!strings.Contains(message, tc.message) {
					t.Errorf("response allowed %v, patch %s, message %q; want allowed %v with a patch containing %q and a message containing %q",
						got.Response.Allowed, got.Response.Patch, message, tc.allowed, tc.patch, tc.message)
				}
			})
		}
	}
}
