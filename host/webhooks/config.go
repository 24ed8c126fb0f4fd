package webhooks

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Names of the webhook configurations: deploy/webhooks ships them empty, the controller registers its webhooks
// in them once it serves (host/app).
const (
	ValidatingConfigName = "operating-system-manager"
	MutatingConfigName   = "operating-system-manager"
)

// Configurations returns the webhook configurations that route admission requests to the controller's
// service: what the controller registers once it serves its certificate (host/app); integration tests and
// `make run` install these into envtest, which points them at the process.
func Configurations(namespace, service string) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	ref := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: namespace, Name: service, Path: ptr.To(path), Port: ptr.To[int32](443)}}
	}
	rule := func(group, resource string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: ops,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1alpha1"}, Resources: []string{resource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
		}}
	}
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: ValidatingConfigName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{
				Name: "operatingsystemprofiles.operatingsystemmanager.k8c.io", ClientConfig: ref(PathValidateProfile),
				Rules: rule("operatingsystemmanager.k8c.io", "operatingsystemprofiles", create, update), SideEffects: none,
				AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Fail), TimeoutSeconds: ptr.To[int32](30),
			},
			{
				Name: "operatingsystemprofileextensions.operatingsystemmanager.k8c.io", ClientConfig: ref(PathValidateExtension),
				Rules: rule("operatingsystemmanager.k8c.io", "operatingsystemprofileextensions", create, update), SideEffects: none,
				AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Fail), TimeoutSeconds: ptr.To[int32](30),
			},
			{
				Name: "operatingsystemconfigs.operatingsystemmanager.k8c.io", ClientConfig: ref(PathValidateConfig),
				Rules: rule("operatingsystemmanager.k8c.io", "operatingsystemconfigs", update), SideEffects: none,
				AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Fail), TimeoutSeconds: ptr.To[int32](10),
			},
		},
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: MutatingConfigName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "machinedeployments.cluster.k8s.io", ClientConfig: ref(PathDefaultMachineDeployment),
			Rules: rule("cluster.k8s.io", "machinedeployments", create, update), SideEffects: none,
			AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Fail), TimeoutSeconds: ptr.To[int32](10),
			ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
	return validating, mutating
}
