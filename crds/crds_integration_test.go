package crds_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/testenv"
)

// TestCRDsAgainstRealAPIServer installs the generated CRDs into a real kube-apiserver and checks what users
// meet: upstream-style objects apply and read back unchanged, upstream's own default profiles apply with
// kubectl, and invalid profiles are rejected with a message naming the field.
func TestCRDsAgainstRealAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ns := env.Namespace(t, "osm-crds")

	t.Run("upstream-style profile round-trips", func(t *testing.T) {
		osp := &osmv1alpha1.OperatingSystemProfile{}
		readYAML(t, "testdata/osp-minimal.yaml", osp)
		osp.Namespace = ns
		want := osp.Spec.DeepCopy()
		if err := env.Client.Create(context.Background(), osp); err != nil {
			t.Fatalf("create: %v", err)
		}
		got := &osmv1alpha1.OperatingSystemProfile{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(osp), got); err != nil {
			t.Fatal(err)
		}
		// The API server applies the CRD defaults: cloud-init and 644 for files without permissions.
		want.ProvisioningUtility = osmv1alpha1.ProvisioningUtilityCloudInit
		want.ProvisioningConfig.SupportedContainerRuntimes[0].Files[0].Permissions = ptr.To[int32](644)
		want.ProvisioningConfig.Files[0].Permissions = ptr.To[int32](644)
		if diff := cmp.Diff(want, &got.Spec); diff != "" {
			t.Errorf("profile changed on the way through the API server (-want +got):\n%s", diff)
		}
	})

	t.Run("machinedeployment round-trips", func(t *testing.T) {
		md := &clusterv1alpha1.MachineDeployment{}
		readYAML(t, filepath.Join(testenv.RepoRoot(), "deploy/examples/machinedeployment-ubuntu.yaml"), md)
		md.Namespace = ns
		if err := env.Client.Create(context.Background(), md); err != nil {
			t.Fatalf("create: %v", err)
		}
		got := &clusterv1alpha1.MachineDeployment{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(md), got); err != nil {
			t.Fatal(err)
		}
		pc, err := got.ProviderConfig()
		if err != nil {
			t.Fatal(err)
		}
		if pc.CloudProvider != "aws" || pc.OperatingSystem != "ubuntu" || len(pc.SSHPublicKeys) != 1 {
			t.Errorf("provider config lost fields: %+v", pc)
		}
		if !strings.Contains(string(pc.CloudProviderSpec.Raw), `"instanceType":"t3.medium"`) {
			t.Errorf("cloudProviderSpec pruned: %s", pc.CloudProviderSpec.Raw)
		}
		if got.Spec.Template.Spec.Versions.Kubelet != "1.33.2" {
			t.Errorf("kubelet version = %q", got.Spec.Template.Spec.Versions.Kubelet)
		}
		if got.Annotations[clusterv1alpha1.AnnotationOSP] != "osp-ubuntu" {
			t.Errorf("annotations = %v", got.Annotations)
		}
		if got.Spec.Template.Labels["name"] != "workers" {
			t.Errorf("template metadata pruned: %+v", got.Spec.Template.ObjectMeta)
		}
	})

	t.Run("upstream default profiles apply unchanged with kubectl", func(t *testing.T) {
		files, err := filepath.Glob("testdata/upstream/osp-*.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatal("no upstream profiles under testdata/upstream")
		}
		for _, f := range files {
			out, err := exec.Command(testenv.Kubectl(t), "--kubeconfig", env.Kubeconfig, "apply",
				"--server-side", "-f", f).CombinedOutput()
			if err != nil {
				t.Errorf("kubectl apply -f %s: %v\n%s", f, err, out)
				continue
			}
			// Read the object back and compare it field by field with the file, so that nothing upstream
			// writes is pruned by our schema.
			sent := &unstructured.Unstructured{}
			readYAML(t, f, &sent.Object)
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(sent.GroupVersionKind())
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(sent), got); err != nil {
				t.Fatal(err)
			}
			// Strict decoding proves our Go types know every field upstream writes.
			data, _ := os.ReadFile(f)
			if err := yaml.UnmarshalStrict(data, &osmv1alpha1.OperatingSystemProfile{}); err != nil {
				t.Errorf("%s has fields the API types do not know: %v", f, err)
			}
			want := normalize(t, sent.Object["spec"])
			applyCRDDefaults(want)
			if diff := cmp.Diff(want, normalize(t, got.Object["spec"])); diff != "" {
				t.Errorf("%s: spec changed by the API server (-sent +stored):\n%s", f, diff)
			}
		}
	})

	t.Run("invalid profiles are rejected naming the field", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			mutate    func(*osmv1alpha1.OperatingSystemProfile)
			wantField string
			wantText  string
		}{
			{"version without v", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.Version = "1.0.0" },
				"spec.version", "should match"},
			{"non-octal permissions", func(o *osmv1alpha1.OperatingSystemProfile) {
				o.Spec.BootstrapConfig.Files[0].Permissions = ptr.To[int32](689)
			}, "spec.bootstrapConfig.files[0].permissions", "octal"},
			{"permissions out of range", func(o *osmv1alpha1.OperatingSystemProfile) {
				o.Spec.BootstrapConfig.Files[0].Permissions = ptr.To[int32](17777)
			}, "spec.bootstrapConfig.files[0].permissions", "less than or equal to 7777"},
			{"relative file path", func(o *osmv1alpha1.OperatingSystemProfile) {
				o.Spec.BootstrapConfig.Files[0].Path = "opt/bin/x"
			}, "spec.bootstrapConfig.files[0].path", "should match"},
			{"no cloud provider", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.SupportedCloudProviders = nil },
				"spec.supportedCloudProviders", "Required value"},
			{"plugin with builtin and image", func(o *osmv1alpha1.OperatingSystemProfile) {
				o.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "ubuntu",
					Image: "registry.example.com/osm/ubuntu@sha256:" + strings.Repeat("a", 64)}
			}, "spec.plugin", "exactly one of builtin or image"},
			{"plugin image by tag only", func(o *osmv1alpha1.OperatingSystemProfile) {
				o.Spec.Plugin = &osmv1alpha1.PluginReference{Image: "registry.example.com/osm/ubuntu:latest"}
			}, "spec.plugin.image", "should match"},
			{"unknown container runtime", func(o *osmv1alpha1.OperatingSystemProfile) {
				o.Spec.ProvisioningConfig.SupportedContainerRuntimes[0].Name = "rkt"
			}, "spec.provisioningConfig.supportedContainerRuntimes[0].name", "Unsupported value"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				osp := &osmv1alpha1.OperatingSystemProfile{}
				readYAML(t, "testdata/osp-minimal.yaml", osp)
				osp.Namespace = ns
				osp.Name = "invalid-" + strings.ReplaceAll(tc.name, " ", "-")
				tc.mutate(osp)
				err := env.Client.Create(context.Background(), osp)
				if !apierrors.IsInvalid(err) {
					t.Fatalf("want Invalid error, got %v", err)
				}
				if !strings.Contains(err.Error(), tc.wantField) || !strings.Contains(err.Error(), tc.wantText) {
					t.Errorf("error does not name %q with %q:\n%v", tc.wantField, tc.wantText, err)
				}
			})
		}
	})

	t.Run("a valid plugin reference is accepted", func(t *testing.T) {
		osp := &osmv1alpha1.OperatingSystemProfile{}
		readYAML(t, "testdata/osp-minimal.yaml", osp)
		osp.Namespace, osp.Name = ns, "with-plugin"
		osp.Spec.Plugin = &osmv1alpha1.PluginReference{
			Image:  "registry.example.com/osm/ubuntu:1.0@sha256:" + strings.Repeat("0f", 32),
			Config: map[string]string{"mirror": "https://mirror.example.com"},
		}
		if err := env.Client.Create(context.Background(), osp); err != nil {
			t.Fatalf("create: %v", err)
		}
	})
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// normalize round-trips a value through JSON so that numbers compare equal whatever their Go type.
func normalize(t *testing.T, v any) any {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := yaml.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// applyCRDDefaults adds the defaults the CRD schema declares (the ones upstream's CRD declares too), so that a
// profile as sent can be compared with the profile as stored.
func applyCRDDefaults(spec any) {
	m, ok := spec.(map[string]any)
	if !ok {
		return
	}
	if _, ok := m["provisioningUtility"]; !ok {
		m["provisioningUtility"] = "cloud-init"
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			_, hasPath := v["path"]
			_, hasContent := v["content"]
			if _, hasPerm := v["permissions"]; hasPath && hasContent && !hasPerm {
				v["permissions"] = float64(644)
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(m)
}
