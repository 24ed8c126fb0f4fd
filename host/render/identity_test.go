package render_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/encode/cloudinit"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// TestObjectNamesAreCollisionFree checks the names OSM chooses for itself against the collisions of
// machine-controller's "<md>-<namespace>" names: separator ambiguity (c/a-b and b-c/a), shared long prefixes,
// and names too long to be given in plain form; every name is a valid DNS subdomain.
func TestObjectNamesAreCollisionFree(t *testing.T) {
	long := strings.Repeat("a", 240)
	mds := [][2]string{
		{"c", "a-b"}, {"b-c", "a"}, {"a-b", "c"}, {"a", "b-c"}, {"a", "b.c"}, {"kube-system", "workers"},
		{"ns", long + "-one"}, {"ns", long + "-two"}, {"ns", long + "."}, {"ns", long + "-"},
		{strings.Repeat("n", 63), long}, {strings.Repeat("n", 62), long}, {"ns", strings.Repeat("b", 253)},
		{"ns", strings.Repeat("a", 221)}, {"ns", strings.Repeat("a", 222)},
	}
	for _, suffix := range []string{"config", "kubelet-bootstrap-config", "provisioning-reader"} {
		seen := map[string]string{}
		hashes := map[string]string{}
		for _, nn := range mds {
			md := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: nn[0], Name: nn[1]}}
			name, key := render.ObjectName(md, suffix), nn[0]+"/"+nn[1]
			if len(name) > 253 || !dnsSubdomain.MatchString(name) {
				t.Errorf("%s: %q (%d characters) is not a valid name", key, name, len(name))
			}
			if other, ok := seen[name]; ok {
				t.Errorf("%s and %s both get %q", other, key, name)
			}
			seen[name] = key
			if other, ok := hashes[render.Hash(md)]; ok {
				t.Errorf("%s and %s share a hash", other, key)
			}
			hashes[render.Hash(md)] = key
			if len(render.Hash(md)) > 63 {
				t.Errorf("hash %q does not fit a label value", render.Hash(md))
			}
		}
	}
	plain := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "workers"}}
	if got := render.OSCName(plain); got != "workers.kube-system-config" {
		t.Errorf("OSCName = %q, want the readable form", got)
	}
}

// TestProviderSpecAllowList feeds the credential fields of machine-controller's providers (and some no list
// knows yet) through the allow-list.
func TestProviderSpecAllowList(t *testing.T) {
	raw := `{"region":"eu-central-1","vpcId":"vpc-1","tags":{"team":"a"},"accessKeyId":"AKIA","secretAccessKey":"s1",
		"secretKey":"s2","apiKey":"s3","accessKeySecret":"s4","token":"s5","password":"s6","clientSecret":"s7",
		"applicationCredentialSecret":"s8","serviceAccount":"s9","kubeconfig":"s10","auth":{"user":"u","pass":"s11"},
		"newProviderCredential":"s12"}`
	got := string(render.ProviderSpec([]byte(raw)))
	if want := `{"region":"eu-central-1","tags":{"team":"a"},"vpcId":"vpc-1"}`; got != want {
		t.Errorf("ProviderSpec = %s, want %s", got, want)
	}
	os := string(render.OSSpec([]byte(`{"distUpgradeOnBoot":true,"rhelSubscriptionManagerPassword":"p","rhsmOfflineToken":"t"}`)))
	if os != `{"distUpgradeOnBoot":true}` {
		t.Errorf("OSSpec = %s", os)
	}
	for _, bad := range []string{"", "null", "[1]", "not json"} {
		if got := render.ProviderSpec([]byte(bad)); got != nil {
			t.Errorf("ProviderSpec(%q) = %s, want nil", bad, got)
		}
	}
}

// TestEdgeMachinesAreNamedAfterTheirMachineDeployment: machine-controller creates no edge machines, so nothing
// would replace <MACHINE_NAME>; the cloud-config names the machine after its MachineDeployment, as upstream
// does. Other providers keep the placeholder for machine-controller.
func TestEdgeMachinesAreNamedAfterTheirMachineDeployment(t *testing.T) {
	osp := &osmv1alpha1.OperatingSystemProfile{}
	loadYAML(t, filepath.Join(upstreamDir, "osp-ubuntu.yaml"), osp)
	for provider, want := range map[string]string{"edge": "edge-workers", "hetzner": render.MachineNamePlaceholder} {
		out, err := (&render.Renderer{}).Render(context.Background(), render.Input{
			MachineDeployment: upstreamMD(t, "edge-workers", osp.Name, "1.33.2", "ubuntu", provider, `{}`),
			Profile:           osp,
			Cluster:           render.ClusterInfo{ServerURL: "https://api:6443", CACert: "ca"},
			Settings:          upstreamSettings(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		data, err := out.UserData(context.Background(), abi.StageBootstrap, render.SecretValues{})
		if err != nil {
			t.Fatal(err)
		}
		var doc cloudinit.Document
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Hostname != want {
			t.Errorf("%s: hostname = %q, want %q", provider, doc.Hostname, want)
		}
		machineName := ""
		for _, f := range doc.WriteFiles {
			if f.Path == render.MachineNameFile {
				machineName = f.Content
			}
		}
		if machineName != want {
			t.Errorf("%s: %s = %q (encoding as written), want %q", provider, render.MachineNameFile, machineName, want)
		}
		spec, _ := json.Marshal(out.Spec.CloudProvider)
		if !strings.Contains(string(spec), provider) {
			t.Errorf("cloud provider %s", spec)
		}
	}
}
