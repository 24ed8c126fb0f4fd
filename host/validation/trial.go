package validation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/templates"
	"github.com/osmhq/osm/sdk/abi"
)

// TrialKubeletVersion is the kubelet version of the sample MachineDeployment a profile is trial-rendered for.
const TrialKubeletVersion = "1.33.0"

// trialCA is a syntactically valid placeholder; a trial render never reaches a node.
const trialCA = "-----BEGIN CERTIFICATE-----\nTRIAL\n-----END CERTIFICATE-----\n"

// trialRender renders the profile for a sample MachineDeployment of every supported cloud provider, which is
// the only way to find template errors that appear at execution (an unknown field, a bad function argument)
// and plugin errors for a provider.
func (v *ProfileValidator) trialRender(ctx context.Context, osp *osmv1alpha1.OperatingSystemProfile, plugin render.Plugin) field.ErrorList {
	var errs field.ErrorList
	settings := v.Settings
	if settings.ContainerRuntime == "" {
		settings = render.DefaultSettings()
	}
	renderer := &render.Renderer{Plugins: fixed{plugin}}
	for i, cp := range osp.Spec.SupportedCloudProviders {
		if err := ctx.Err(); err != nil {
			// The request was cancelled or timed out: the client reads no answer, but the render stops here.
			return append(errs, field.InternalError(field.NewPath("spec"), fmt.Errorf("trial render stopped: %w", err)))
		}
		md := trialMachineDeployment(string(osp.Spec.OSName), cp.Name, osp.Name)
		out, err := renderer.Render(ctx, render.Input{MachineDeployment: md, Profile: osp, Settings: settings,
			Cluster: render.ClusterInfo{ServerURL: "https://trial.invalid:6443", CACert: trialCA}})
		if err == nil {
			for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
				if _, err = out.UserData(ctx, stage, render.SecretValues{Plugin: render.PluginSecretPlaceholders(osp)}); err != nil {
					break
				}
			}
		}
		if err == nil {
			continue
		}
		var fe *templates.FieldError
		if errors.As(err, &fe) {
			errs = append(errs, field.Invalid(fieldPath(fe.Field), "", fmt.Sprintf("rendering for cloud provider %s: %s", cp.Name, errors.Unwrap(fe))))
			return errs // the same template fails for every provider
		}
		errs = append(errs, field.Invalid(field.NewPath("spec", "supportedCloudProviders").Index(i), cp.Name,
			fmt.Sprintf("rendering for this cloud provider fails: %v", err)))
	}
	return errs
}

// fixed is a PluginSource that always returns the plugin the validator already resolved.
type fixed struct{ p render.Plugin }

func (f fixed) Resolve(context.Context, string, *osmv1alpha1.PluginReference) (render.Plugin, error) {
	if f.p == nil {
		return nil, errors.New("plugin not resolved")
	}
	return f.p, nil
}

func trialMachineDeployment(osName, provider, osp string) *clusterv1alpha1.MachineDeployment {
	pc, _ := json.Marshal(map[string]any{
		"cloudProvider": provider, "cloudProviderSpec": map[string]any{},
		"operatingSystem": osName, "operatingSystemSpec": map[string]any{},
		"sshPublicKeys": []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITrialKey trial@osm"},
	})
	return &clusterv1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "trial-" + strings.ReplaceAll(provider, "_", "-"), Namespace: "kube-system",
			Annotations: map[string]string{clusterv1alpha1.AnnotationOSP: osp, clusterv1alpha1.AnnotationRevision: "1"}},
		Spec: clusterv1alpha1.MachineDeploymentSpec{Template: clusterv1alpha1.MachineTemplateSpec{Spec: clusterv1alpha1.MachineSpec{
			ProviderSpec: clusterv1alpha1.ProviderSpec{Value: &runtime.RawExtension{Raw: pc}},
			Versions:     clusterv1alpha1.MachineVersionInfo{Kubelet: TrialKubeletVersion},
		}}},
	}
}
