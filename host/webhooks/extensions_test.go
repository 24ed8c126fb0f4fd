package webhooks

import (
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/scheme"
	"github.com/osmhq/osm/host/validation"
)

// siteExtension writes a file on the profiles named.
func siteExtension(namespace, name, path, data string, order int32, profiles ...string) *osmv1alpha1.OperatingSystemProfileExtension {
	return &osmv1alpha1.OperatingSystemProfileExtension{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: osmv1alpha1.OperatingSystemProfileExtensionSpec{Selector: osmv1alpha1.ProfileSelector{Names: profiles}, Order: order,
			ProvisioningConfig: &osmv1alpha1.ExtensionConfig{Files: []osmv1alpha1.File{{Path: path,
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: data}}}}}},
	}
}

func TestExtensionValidator(t *testing.T) {
	stored := []client.Object{
		profile("team-a", "osp-ubuntu"), profile("team-b", "osp-ubuntu"),
		siteExtension("team-a", "baseline", "/etc/baseline", "a", 10, "osp-ubuntu"),
		siteExtension("team-b", "other-team", "/etc/other-team", "b", 10, "osp-ubuntu"), // another namespace: never applies
		siteExtension("team-a", "site", "/etc/site", "v1", 20, "osp-ubuntu"),            // the stored version of "site"
	}
	refused := func(msg ...string) verdict { return verdict{code: http.StatusUnprocessableEntity, message: msg} }
	conflicting := siteExtension("team-a", "late", "/etc/baseline", "c", 30, "osp-ubuntu")
	relabelled := conflicting.DeepCopy()
	relabelled.Labels = map[string]string{"x": "y"}

	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		obj, old *osmv1alpha1.OperatingSystemProfileExtension
		failRead bool // every read fails: the review must not read
		want     verdict
	}{
		{name: "extension that renders", op: admissionv1.Create,
			obj: siteExtension("team-a", "motd", "/etc/site-motd", "hi", 30, "osp-ubuntu"), want: verdict{allowed: true}},
		{name: "conflict with another extension", op: admissionv1.Create, obj: conflicting,
			want: refused(`OperatingSystemProfileExtension.operatingsystemmanager.k8c.io "late" is invalid`,
				"spec.provisioningConfig.overrides", "with profile osp-ubuntu", `"baseline"`, "/etc/baseline")},
		{name: "overriding the other extension's file", op: admissionv1.Create, obj: func() *osmv1alpha1.OperatingSystemProfileExtension {
			x := conflicting.DeepCopy()
			x.Spec.ProvisioningConfig.Overrides = []string{"/etc/baseline"}
			return x
		}(), want: verdict{allowed: true}},
		{name: "conflict with a profile's file", op: admissionv1.Create,
			obj: siteExtension("team-a", "motd", "/etc/motd", "hi", 30, "osp-ubuntu"), want: refused("spec.provisioningConfig.overrides", "/etc/motd")},
		{name: "an extension of another namespace does not conflict", op: admissionv1.Create,
			obj: siteExtension("team-a", "site-2", "/etc/other-team", "x", 30, "osp-ubuntu"), want: verdict{allowed: true}},
		{name: "invalid structure", op: admissionv1.Create, obj: siteExtension("team-a", "rel", "etc/rel", "x", 30, "osp-ubuntu"),
			want: refused("spec.provisioningConfig.files[0].path")},
		{name: "template that does not execute", op: admissionv1.Create,
			obj: siteExtension("team-a", "tpl", "/etc/tpl", "{{ .NoSuchField }}", 30, "osp-ubuntu"), want: refused("NoSuchField")},
		{name: "update does not conflict with its own stored version", op: admissionv1.Update,
			obj: siteExtension("team-a", "site", "/etc/site", "v2", 20, "osp-ubuntu"),
			old: siteExtension("team-a", "site", "/etc/site", "v1", 20, "osp-ubuntu"), want: verdict{allowed: true}},
		{name: "update into a conflict", op: admissionv1.Update,
			obj: siteExtension("team-a", "site", "/etc/baseline", "v2", 20, "osp-ubuntu"),
			old: siteExtension("team-a", "site", "/etc/site", "v1", 20, "osp-ubuntu"), want: refused(`"baseline"`)},
		{name: "metadata-only update is not reviewed", op: admissionv1.Update, obj: relabelled, old: conflicting, failRead: true,
			want: verdict{allowed: true}},
		{name: "profiles that cannot be listed", op: admissionv1.Create, obj: siteExtension("team-a", "motd", "/etc/site-motd", "hi", 30, "osp-ubuntu"),
			failRead: true, want: verdict{code: http.StatusForbidden, message: []string{"apiserver unavailable"}}},
		{name: "delete", op: admissionv1.Delete, old: conflicting, failRead: true, want: verdict{allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := admission.WithValidator[*osmv1alpha1.OperatingSystemProfileExtension](scheme.Scheme,
				&ExtensionValidator{Reader: reader(tc.failRead, stored...), Validator: &validation.ExtensionValidator{}})
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
