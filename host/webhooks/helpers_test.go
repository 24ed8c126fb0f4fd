package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/scheme"
)

// review sends an admission request for obj (and old, on update) to h, as the API server would: objects as
// JSON with their kind.
func review(t *testing.T, h admission.Handler, op admissionv1.Operation, obj, old client.Object) admission.Response {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "review-1", Operation: op}}
	if obj != nil {
		req.Object = raw(t, obj)
		req.Name, req.Namespace = obj.GetName(), obj.GetNamespace()
	}
	if old != nil {
		req.OldObject = raw(t, old)
	}
	return h.Handle(context.Background(), req)
}

func raw(t *testing.T, obj client.Object) runtime.RawExtension {
	t.Helper()
	obj = obj.DeepCopyObject().(client.Object)
	gvk, err := apiutil.GVKForObject(obj, scheme.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

// verdict is what a test expects of an admission response.
type verdict struct {
	allowed bool
	code    int32    // the status code of a refusal
	message []string // substrings of a refusal's message
	warning string   // a substring of the one warning expected; "" for none
}

func checkVerdict(t *testing.T, resp admission.Response, want verdict) {
	t.Helper()
	if resp.Allowed != want.allowed {
		t.Fatalf("allowed = %v, want %v (result %+v)", resp.Allowed, want.allowed, resp.Result)
	}
	if !want.allowed {
		if resp.Result == nil || resp.Result.Code != want.code {
			t.Errorf("result = %+v, want code %d", resp.Result, want.code)
		}
		for _, m := range want.message {
			if resp.Result == nil || !strings.Contains(resp.Result.Message, m) {
				t.Errorf("message %q does not contain %q", resp.Result.Message, m)
			}
		}
	}
	switch {
	case want.warning == "" && len(resp.Warnings) > 0:
		t.Errorf("warnings = %q, want none", resp.Warnings)
	case want.warning != "" && (len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], want.warning)):
		t.Errorf("warnings = %q, want one containing %q", resp.Warnings, want.warning)
	}
}

// profile is a valid templates-only profile.
func profile(namespace, name string) *osmv1alpha1.OperatingSystemProfile {
	return &osmv1alpha1.OperatingSystemProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: osmv1alpha1.OperatingSystemProfileSpec{
			OSName: "ubuntu", OSVersion: "22.04", Version: "v1.0.0",
			SupportedCloudProviders: []osmv1alpha1.CloudProviderSpec{{Name: "aws"}},
			ProvisioningConfig: osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{{Path: "/etc/motd",
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "hello {{ .KubeVersion }}"}}}}},
		},
	}
}

// reader is a fake API reader holding objs; with failing set, every read fails.
func reader(failing bool, objs ...client.Object) client.Client {
	b := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...)
	if failing {
		fail := func() error { return &failedRead{} }
		b = b.WithInterceptorFuncs(interceptor.Funcs{
			Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return fail()
			},
			List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error { return fail() },
		})
	}
	return b.Build()
}

type failedRead struct{}

func (*failedRead) Error() string { return "apiserver unavailable" }
