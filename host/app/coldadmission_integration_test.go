package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/host/validation"
	"github.com/osmhq/osm/plugins"
)

// TestAdmissionWithAColdPluginCache starts the controller with an empty plugin cache, so every plugin has to be
// compiled (seconds, tens of seconds under -race on a busy machine), and at once creates a profile and an
// extension that need the Ubuntu plugin: no admission request waits for the compile beyond
// validation.AdmissionPluginWait (the webhooks' timeout is 30 s), the default profiles are installed through the
// webhook without waiting for any plugin, and the profile's status then reports its plugin.
func TestAdmissionWithAColdPluginCache(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{WebhookInstallOptions: webhookOptions()})
	ctx := context.Background()
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	startOSM(t, env, nil, app.Options{Builtins: plugins.Builtin(), Defaults: defaults, WorkerCount: 2,
		Plugins:            plugin.Config{CacheDir: t.TempDir()},
		HealthProbeAddress: "0", // no waiting for readiness: requests arrive while the plugins compile
	})
	c, warned := warningClient(t, env)

	var ubuntu *osmv1alpha1.OperatingSystemProfile
	for _, d := range defaults {
		if d.Name == "osp-ubuntu" {
			ubuntu = d.DeepCopy()
		}
	}
	site := ubuntu.DeepCopy() // not a shipped spec: admission must check it with its plugin
	site.Name, site.Namespace = "osp-site-ubuntu", osmNamespace
	site.Spec.ProvisioningConfig.Files = append(site.Spec.ProvisioningConfig.Files, osmv1alpha1.File{Path: "/etc/site",
		Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "{{ .KubeVersion }}\n"}}})
	x := &osmv1alpha1.OperatingSystemProfileExtension{}
	x.Name, x.Namespace = "site", osmNamespace
	x.Spec.Selector.Names = []string{"osp-ubuntu", site.Name}
	x.Spec.ProvisioningConfig = &osmv1alpha1.ExtensionConfig{Files: []osmv1alpha1.File{{Path: "/etc/site-ca.pem",
		Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "site CA"}}}}}

	// Each request must be answered well within the webhook's timeout; only a webhook server that is not
	// listening yet is retried.
	bound := validation.AdmissionPluginWait + 10*time.Second
	create := func(obj client.Object) {
		t.Helper()
		eventually(t, wait, "creating "+obj.GetName()+" (the webhook server is starting)", func() error {
			start := time.Now()
			err := c.Create(ctx, obj)
			took := time.Since(start)
			if took > bound {
				t.Fatalf("creating %s took %s (bound %s): %v", obj.GetName(), took.Round(time.Millisecond), bound, err)
			}
			if err == nil || apierrors.IsAlreadyExists(err) {
				t.Logf("%s admitted in %s, %.0f s after the start; warnings: %q", obj.GetName(), took.Round(time.Millisecond),
					time.Since(started).Seconds(), warned.take())
				return nil
			}
			if apierrors.IsInvalid(err) {
				t.Fatalf("creating %s: %v", obj.GetName(), err)
			}
			return err
		})
	}
	create(site)
	create(x)

	eventually(t, wait, "default profiles installed through the webhook", func() error {
		var missing []string
		for _, d := range defaults {
			if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: d.Name}, &osmv1alpha1.OperatingSystemProfile{}); err != nil {
				missing = append(missing, d.Name)
			}
		}
		if len(missing) > 0 {
			return errors.New("missing: " + strings.Join(missing, ", "))
		}
		return nil
	})
	t.Logf("default profiles installed %.0f s after the start", time.Since(started).Seconds())

	eventually(t, wait, "the profile's status reports its plugin", func() error {
		got := &osmv1alpha1.OperatingSystemProfile{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(site), got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, osmv1alpha1.ConditionPluginResolved) || got.Status.Plugin == nil {
			return errors.New("no PluginResolved condition yet")
		}
		return nil
	})

	// A broken template is still refused at once, plugin loaded or not.
	bad := site.DeepCopy()
	bad.Name = "osp-broken"
	bad.Spec.ProvisioningConfig.Files[len(bad.Spec.ProvisioningConfig.Files)-1].Content.Inline.Data = "{{ .NoSuchField }}"
	start := time.Now()
	err = c.Create(ctx, bad)
	if took := time.Since(start); took > bound {
		t.Errorf("refusing a broken template took %s", took)
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "NoSuchField") {
		t.Errorf("want the broken template refused, got %v", err)
	}
}
