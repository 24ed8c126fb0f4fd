package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/testenv"
)

// warningCollector keeps the admission warnings the API server relays.
type warningCollector struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningCollector) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "\n")
}

// TestHostileTemplatesAgainstRealAPIServer: through a real API server and the whole controller, admission warns
// about curl -k and refuses a template past the budget naming the field; a profile whose template blows up for
// one MachineDeployment name passes admission, and at reconcile fails that MachineDeployment only, with a
// TemplateError naming the limit, while the controller keeps rendering its neighbour.
func TestHostileTemplatesAgainstRealAPIServer(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{WebhookInstallOptions: webhookOptions()})
	ctx := context.Background()
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	startOSM(t, env, nil, app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true, WorkerCount: 4})

	warnings := &warningCollector{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warnings
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	osp := &osmv1alpha1.OperatingSystemProfile{}
	readYAMLFile(t, filepath.Join(testenv.RepoRoot(), "crds", "testdata", "upstream", "osp-ubuntu.yaml"), osp)
	osp.Name, osp.Namespace = "osp-hostile", osmNamespace
	osp.Spec.ProvisioningConfig.Files = append(osp.Spec.ProvisioningConfig.Files, osmv1alpha1.File{Path: "/etc/victim",
		Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{
			Data: `{{ if eq .MachineDeploymentName "victim" }}{{ repeat 3000000000 "x" }}{{ else }}fine{{ end }}`}}})
	eventually(t, wait, "creating the profile through the webhook", func() error { return c.Create(ctx, osp.DeepCopy()) })
	if !strings.Contains(warnings.String(), "spec.bootstrapConfig.files[1].content.inline.data: curl -k turns off TLS certificate verification") {
		t.Errorf("no admission warning about curl -k; warnings:\n%s", warnings)
	}

	looping := osp.DeepCopy()
	looping.Name = "osp-looping"
	looping.Spec.ProvisioningConfig.Templates = map[string]string{"loop": "{{ range 1000000000 }}{{ range 1000000000 }}{{ end }}{{ end }}"}
	err = c.Create(ctx, looping)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.provisioningConfig.templates[loop]") || !strings.Contains(err.Error(), "over the Steps limit") {
		t.Fatalf("want an Invalid error naming the template and the Steps limit, got %v", err)
	}

	for _, name := range []string{"victim", "neighbour"} {
		if err := c.Create(ctx, newMD(t, name, "ubuntu", "aws", "osp-hostile")); err != nil {
			t.Fatal(err)
		}
	}
	waitForSecret(t, c, "neighbour-kube-system-provisioning-config", "1")
	cond := waitForNotReady(t, c, "victim.kube-system-config", osmv1alpha1.ReasonTemplateError, "/etc/victim", "over the ValueBytes limit")
	t.Logf("victim: %s", cond.Message)
}
