package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/sdk/plugintest"
)

// cloudCredentials are credentials in a MachineDeployment's provider and OS specs, under the field names
// machine-controller's providers really use.
var cloudCredentials = map[string]string{
	"accessKeyId": "AKIAOSMLEAKACCESSKEYID", "secretAccessKey": "osm-leak-secretAccessKey", "secretKey": "osm-leak-secretKey",
	"apiKey": "osm-leak-apiKey", "accessKeySecret": "osm-leak-accessKeySecret", "token": "osm-leak-token",
	"password": "osm-leak-password", "applicationCredentialSecret": "osm-leak-appcred", "someFutureSecret": "osm-leak-future",
}

const registryPassword = "osm-leak-registry-password"

// TestCredentialsNeverReachPlugins runs a plugin that echoes everything it receives (render and encode
// requests) into its output, its warnings and its stderr, for MachineDeployments whose specs carry cloud
// credentials, with registry credentials configured. No token, registry credential or cloud credential may
// appear in any OperatingSystemConfig, event or line of the controller's log, nor in another
// MachineDeployment's user-data; each MachineDeployment's own user-data Secrets hold its real tokens. An
// encoder that transforms the placeholders (and so would need the real values) fails its MachineDeployment
// only.
func TestCredentialsNeverReachPlugins(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	dockerConfig := fmt.Sprintf(`{"auths":{"registry.example.com":{"username":"osm","password":%q}}}`, registryPassword)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "registry-credentials"},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(dockerConfig)}}); err != nil {
		t.Fatal(err)
	}
	log := &lockedLog{}
	startOSM(t, env, nil, app.Options{
		Builtins:                  os.DirFS(builtins(t, map[string]string{"echo": plugintest.Build(t, filepath.Join("testdata", "plugins", "echo"))})),
		DisableDefaultOSPs:        true,
		WorkerCount:               4,
		RegistryCredentialsSecret: "kube-system/registry-credentials",
		// -log-debug, the most the controller logs.
		Logger: funcr.New(log.write, funcr.Options{Verbosity: 1}),
	})
	for name, utility := range map[string]osmv1alpha1.ProvisioningUtility{"osp-echo": "echo-format", "osp-echo-cloud-init": "cloud-init"} {
		osp := testOSP(name, "v1.0.0")
		osp.Spec.Plugin.Builtin = "echo"
		osp.Spec.ProvisioningUtility = utility
		if err := c.Create(ctx, osp); err != nil {
			t.Fatal(err)
		}
	}
	mds := map[string]*clusterv1alpha1.MachineDeployment{
		"echo-a": leakyMD(t, "echo-a", "osp-echo"), "echo-b": leakyMD(t, "echo-b", "osp-echo-cloud-init"),
		"mangle-a": leakyMD(t, "mangle-a", "osp-echo"),
	}
	for _, md := range mds {
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
	}

	// Each healthy MachineDeployment's user-data holds its own real tokens.
	secrets := map[string][2]*corev1.Secret{}
	tokens := map[string][]string{}
	for _, name := range []string{"echo-a", "echo-b"} {
		boot := waitForSecret(t, c, name+"-kube-system-bootstrap-config", "1")
		prov := waitForSecret(t, c, name+"-kube-system-provisioning-config", "1")
		secrets[name] = [2]*corev1.Secret{boot, prov}
		provToken := string(boot.Data[osc.KeyProvisioningToken])
		bootToken := bootstrapTokenOf(t, c, mds[name])
		tokens[name] = []string{provToken, bootToken, bootToken[strings.Index(bootToken, ".")+1:]}
		if !strings.Contains(userDataText(t, boot), provToken) {
			t.Errorf("%s: the bootstrap user-data lacks its provisioning token", name)
		}
		if !strings.Contains(userDataText(t, prov), bootToken) {
			t.Errorf("%s: the provisioning user-data lacks its bootstrap token", name)
		}
	}
	if !strings.Contains(userDataText(t, secrets["echo-b"][1]), registryPassword) {
		t.Error("the registry credential did not reach the provisioning user-data")
	}

	// The encoder that transformed placeholders fails, naming why, and wrote nothing.
	got := &osmv1alpha1.OperatingSystemConfig{}
	eventually(t, wait, "mangle-a fails", func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(mds["mangle-a"])}, got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, osmv1alpha1.ConditionReady)
		if cond == nil || cond.Reason != osmv1alpha1.ReasonPluginFailed || !strings.Contains(cond.Message, "placeholder") {
			return fmt.Errorf("Ready condition = %+v", cond)
		}
		return nil
	})
	waitForEvent(t, c, "mangle-a", osmv1alpha1.ReasonPluginFailed)
	for _, s := range []string{"bootstrap", "provisioning"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "mangle-a-kube-system-" + s + "-config"}, &corev1.Secret{}); err == nil {
			t.Errorf("mangle-a: the %s Secret was written", s)
		}
	}
	waitForEvent(t, c, "echo-a", "PluginWarning") // the plugin's echo reached the events

	leaks := map[string]string{"registry password": registryPassword}
	for k, v := range cloudCredentials {
		leaks["cloud credential "+k] = v
	}
	for name, toks := range tokens {
		for i, tok := range toks {
			leaks[fmt.Sprintf("%s token %d", name, i)] = tok
		}
	}
	oscs := &osmv1alpha1.OperatingSystemConfigList{}
	events := &corev1.EventList{}
	if err := c.List(ctx, oscs); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, events); err != nil {
		t.Fatal(err)
	}
	if len(oscs.Items) != 3 || !strings.Contains(asJSON(t, oscs), "/etc/osm/echo-render-provisioning") {
		t.Fatalf("want the three OSCs with the plugin's echo, got %d", len(oscs.Items))
	}
	places := map[string]string{"OperatingSystemConfigs": asJSON(t, oscs), "events": asJSON(t, events), "controller log": log.String()}
	for place, text := range places {
		for what, value := range leaks {
			if i := strings.Index(text, value); i >= 0 {
				t.Errorf("the %s hold the %s: ...%s...", place, what, text[max(0, i-600):min(len(text), i+100)])
			}
		}
	}
	if !strings.Contains(log.String(), "echo render request") || !strings.Contains(log.String(), "echo encode request") {
		t.Error("the plugin's stderr did not reach the controller log; the log check proves nothing")
	}
	// What the allow-list keeps still arrives: in the OSC, and in the request the plugin echoed.
	if !strings.Contains(asJSON(t, oscs), `"cloudProvider":{"name":"aws","spec":{"region":"test"}}`) {
		t.Error("the OSC's cloudProvider.spec lacks the allowed field region")
	}
	if !strings.Contains(asJSON(t, oscs), `\"machineSpec\":{\"region\":\"test\"}`) {
		t.Error("the plugin did not get the allowed field region")
	}
	// No MachineDeployment's user-data holds another's tokens.
	for name, pair := range secrets {
		for other, toks := range tokens {
			if other == name {
				continue
			}
			for _, s := range pair {
				for _, tok := range toks {
					if strings.Contains(userDataText(t, s), tok) {
						t.Errorf("%s's %s holds a token of %s", name, s.Name, other)
					}
				}
			}
		}
	}
}

// userDataText is a user-data Secret's data and, for cloud-config, its files decoded.
func userDataText(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	text := string(s.Data[render.CloudConfigKey])
	if strings.HasPrefix(text, "#cloud-config") {
		text += decodedFiles(t, s)
	}
	return text
}

// leakyMD is a testos MachineDeployment whose provider and OS specs carry credentials.
func leakyMD(t *testing.T, name, osp string) *clusterv1alpha1.MachineDeployment {
	md := newMD(t, name, "testos", "aws", osp)
	spec := map[string]any{"region": "test"}
	for k, v := range cloudCredentials {
		spec[k] = v
	}
	pc, err := json.Marshal(map[string]any{
		"cloudProvider": "aws", "cloudProviderSpec": spec, "operatingSystem": "testos",
		"operatingSystemSpec": map[string]any{"rhelSubscriptionManagerPassword": cloudCredentials["password"], "token": cloudCredentials["token"]},
		"sshPublicKeys":       []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOsmTestKey test@osm"},
	})
	if err != nil {
		t.Fatal(err)
	}
	md.Spec.Template.Spec.ProviderSpec.Value.Raw = pc
	return md
}

// lockedLog collects the controller's log lines.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) write(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(prefix + " " + args + "\n")
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
