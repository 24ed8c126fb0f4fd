package webhooks

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestConfigurations: every webhook routes its resource, for the operations it reviews, to the path its handler
// is served on (Setup, SetupExtensions), through the controller's service, and fails closed.
func TestConfigurations(t *testing.T) {
	validating, mutating := Configurations("osm-system", "osm-webhook")
	if validating.Name != ValidatingConfigName || mutating.Name != MutatingConfigName {
		t.Errorf("names %q, %q; want %q, %q", validating.Name, mutating.Name, ValidatingConfigName, MutatingConfigName)
	}
	type hook struct {
		name     string
		clientCf admissionregistrationv1.WebhookClientConfig
		rules    []admissionregistrationv1.RuleWithOperations
		policy   *admissionregistrationv1.FailurePolicyType
		side     *admissionregistrationv1.SideEffectClass
		versions []string
		timeout  *int32
	}
	var got []hook
	for _, w := range validating.Webhooks {
		got = append(got, hook{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.SideEffects, w.AdmissionReviewVersions, w.TimeoutSeconds})
	}
	for _, w := range mutating.Webhooks {
		got = append(got, hook{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.SideEffects, w.AdmissionReviewVersions, w.TimeoutSeconds})
		if w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy {
			t.Errorf("%s: reinvocation policy %v, want Never", w.Name, w.ReinvocationPolicy)
		}
	}

	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	want := []struct {
		name, path, group, resource string
		ops                         []admissionregistrationv1.OperationType
		timeout                     int32
	}{
		{"operatingsystemprofiles.operatingsystemmanager.k8c.io", PathValidateProfile, "operatingsystemmanager.k8c.io",
			"operatingsystemprofiles", []admissionregistrationv1.OperationType{create, update}, 30},
		{"operatingsystemprofileextensions.operatingsystemmanager.k8c.io", PathValidateExtension, "operatingsystemmanager.k8c.io",
			"operatingsystemprofileextensions", []admissionregistrationv1.OperationType{create, update}, 30},
		{"operatingsystemconfigs.operatingsystemmanager.k8c.io", PathValidateConfig, "operatingsystemmanager.k8c.io",
			"operatingsystemconfigs", []admissionregistrationv1.OperationType{update}, 10},
		{"machinedeployments.cluster.k8s.io", PathDefaultMachineDeployment, "cluster.k8s.io",
			"machinedeployments", []admissionregistrationv1.OperationType{create, update}, 10},
	}
	if len(got) != len(want) {
		t.Fatalf("%d webhooks, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		t.Run(w.name, func(t *testing.T) {
			if g.name != w.name {
				t.Fatalf("webhook %d is %s, want %s", i, g.name, w.name)
			}
			svc := g.clientCf.Service
			if svc == nil || svc.Namespace != "osm-system" || svc.Name != "osm-webhook" || svc.Path == nil || *svc.Path != w.path ||
				svc.Port == nil || *svc.Port != 443 || g.clientCf.URL != nil {
				t.Errorf("client config %+v, want service osm-system/osm-webhook:443%s", g.clientCf, w.path)
			}
			if len(g.rules) != 1 {
				t.Fatalf("rules %+v, want one", g.rules)
			}
			r := g.rules[0]
			if !slices.Equal(r.Operations, w.ops) || !slices.Equal(r.APIGroups, []string{w.group}) ||
				!slices.Equal(r.APIVersions, []string{"v1alpha1"}) || !slices.Equal(r.Resources, []string{w.resource}) ||
				r.Scope == nil || *r.Scope != admissionregistrationv1.NamespacedScope {
				t.Errorf("rule %+v, want %v of %s/v1alpha1 %s, namespaced", r, w.ops, w.group, w.resource)
			}
			if g.policy == nil || *g.policy != admissionregistrationv1.Fail {
				t.Errorf("failure policy %v, want Fail", g.policy)
			}
			if g.side == nil || *g.side != admissionregistrationv1.SideEffectClassNone {
				t.Errorf("side effects %v, want None", g.side)
			}
			if !slices.Equal(g.versions, []string{"v1"}) {
				t.Errorf("admission review versions %v, want v1", g.versions)
			}
			if g.timeout == nil || *g.timeout != w.timeout {
				t.Errorf("timeout %v, want %d s", g.timeout, w.timeout)
			}
		})
	}
}
