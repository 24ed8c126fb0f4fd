package app_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/host/webhooks"
	"github.com/osmhq/osm/plugins"
)

// TestProfileExtensions runs the controller with its default profiles against a real API server and applies the
// site extension of deploy/examples to them: it re-renders exactly the MachineDeployments whose profile it selects,
// once; a change re-renders them again; a conflicting extension fails them with the ExtensionConflict reason and
// leaves their Secrets as they were; a new default profile version keeps the extension; deleting it removes
// what it added.
func TestProfileExtensions(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	// The controller ships an older osp-ubuntu first; a restart later upgrades it to the real default.
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	older := make([]*osmv1alpha1.OperatingSystemProfile, len(defaults))
	for i, d := range defaults {
		older[i] = d.DeepCopy()
		if d.Name == "osp-ubuntu" {
			older[i].Spec.Version = "v0.0.1"
			older[i].Spec.ProvisioningConfig.Files = append(older[i].Spec.ProvisioningConfig.Files, osmv1alpha1.File{Path: "/etc/osm-old-default",
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "old"}}})
		}
	}
	stop := startStoppable(t, env, nil, app.Options{Builtins: plugins.Builtin(), WorkerCount: 4, Defaults: older})
	defer func() { stop() }()

	const sysctlPath = "/etc/sysctl.d/90-site.conf"
	mds := map[string]bool{"ubuntu-workers": true, "debian-workers": true, "rhel-workers": false} // selected?
	for name := range mds {
		os := strings.TrimSuffix(name, "-workers")
		eventually(t, wait, "default profile osp-"+os, func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "osp-" + os}, &osmv1alpha1.OperatingSystemProfile{})
		})
		if err := c.Create(ctx, newMD(t, name, os, "aws", "osp-"+os)); err != nil {
			t.Fatal(err)
		}
	}
	// The OSC's name is OSM's choice (render.OSCName); the Secrets' names are machine-controller's contract.
	ubuntuOSC := client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(newMD(t, "ubuntu-workers", "ubuntu", "aws", "osp-ubuntu"))}
	versions := map[string]string{}
	for name := range mds {
		s := waitForSecret(t, c, name+"-kube-system-provisioning-config", "1")
		if _, ok := userDataFiles(t, s)[sysctlPath]; ok {
			t.Fatalf("%s has %s before any extension exists", name, sysctlPath)
		}
		versions[name] = s.ResourceVersion
	}

	x := &osmv1alpha1.OperatingSystemProfileExtension{}
	readYAMLFile(t, filepath.Join(testenv.RepoRoot(), "deploy", "examples", "extension-site.yaml"), x)
	x.Namespace = osmNamespace
	if err := c.Create(ctx, x); err != nil {
		t.Fatal(err)
	}

	// waitRendered waits until every selected MachineDeployment's provisioning Secret has want as the sysctl file
	// ("" = absent), then checks that the others were not written and that the selected ones stay as they are.
	waitRendered := func(t *testing.T, want string) {
		t.Helper()
		for name, selected := range mds {
			if !selected {
				continue
			}
			eventually(t, wait, name+" rendered with the extension's current content", func() error {
				s := &corev1.Secret{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: name + "-kube-system-provisioning-config"}, s); err != nil {
					return err
				}
				if got := userDataFiles(t, s)[sysctlPath]; got != want {
					return fmt.Errorf("%s = %q", sysctlPath, got)
				}
				versions[name] = s.ResourceVersion
				return nil
			})
		}
		// Once: give the controller time to write again if it were going to, then compare.
		absenceWindow(3 * time.Second)
		for name := range mds {
			s := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: name + "-kube-system-provisioning-config"}, s); err != nil {
				t.Fatal(err)
			}
			if s.ResourceVersion != versions[name] {
				t.Errorf("%s's provisioning Secret was written again (resourceVersion %s -> %s)", name, versions[name], s.ResourceVersion)
			}
		}
	}
	content := x.Spec.ProvisioningConfig.Files[2].Content.Inline.Data
	waitRendered(t, content)

	t.Run("the OSC and the extension's status name each other", func(t *testing.T) {
		osc := &osmv1alpha1.OperatingSystemConfig{}
		if err := c.Get(ctx, ubuntuOSC, osc); err != nil {
			t.Fatal(err)
		}
		if len(osc.Status.Extensions) != 1 || osc.Status.Extensions[0].Name != x.Name || osc.Status.Extensions[0].Generation != 1 {
			t.Errorf("OSC status extensions = %+v", osc.Status.Extensions)
		}
	})

	t.Run("the extension's status lists the profiles it applies to", func(t *testing.T) {
		eventually(t, wait, "extension status", func() error {
			got := &osmv1alpha1.OperatingSystemProfileExtension{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(x), got); err != nil {
				return err
			}
			want := []string{"osp-debian", "osp-debian-12", "osp-ubuntu", "osp-ubuntu-22.04"}
			if !slices.Equal(got.Status.Profiles, want) || !meta.IsStatusConditionTrue(got.Status.Conditions, osmv1alpha1.ConditionReady) {
				return fmt.Errorf("status %+v, want profiles %v and Ready", got.Status, want)
			}
			return nil
		})
	})

	t.Run("a change re-renders the selected machines", func(t *testing.T) {
		fresh := &osmv1alpha1.OperatingSystemProfileExtension{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(x), fresh); err != nil {
			t.Fatal(err)
		}
		fresh.Spec.ProvisioningConfig.Files[2].Content.Inline.Data = "vm.max_map_count = 524288\n"
		if err := c.Update(ctx, fresh); err != nil {
			t.Fatal(err)
		}
		content = "vm.max_map_count = 524288\n"
		waitRendered(t, content)
	})

	t.Run("a conflicting extension fails the machines it collides on and overwrites nothing", func(t *testing.T) {
		bad := &osmv1alpha1.OperatingSystemProfileExtension{}
		bad.Name, bad.Namespace = "late-sysctl", osmNamespace
		bad.Spec = osmv1alpha1.OperatingSystemProfileExtensionSpec{
			Selector: osmv1alpha1.ProfileSelector{Names: []string{"osp-ubuntu"}},
			Order:    10,
			ProvisioningConfig: &osmv1alpha1.ExtensionConfig{Files: []osmv1alpha1.File{{Path: sysctlPath,
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "vm.swappiness = 1\n"}}}}},
		}
		if err := c.Create(ctx, bad); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "ExtensionConflict on the ubuntu OSC", func() error {
			osc := &osmv1alpha1.OperatingSystemConfig{}
			if err := c.Get(ctx, ubuntuOSC, osc); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(osc.Status.Conditions, osmv1alpha1.ConditionReady)
			if cond == nil || cond.Reason != osmv1alpha1.ReasonExtensionConflict {
				return fmt.Errorf("Ready = %+v", cond)
			}
			for _, want := range []string{`"late-sysctl"`, `"site-baseline"`, sysctlPath} {
				if !strings.Contains(cond.Message, want) {
					return fmt.Errorf("message %q does not name %s", cond.Message, want)
				}
			}
			return nil
		})
		waitForEvent(t, c, "ubuntu-workers", osmv1alpha1.ReasonExtensionConflict)
		eventually(t, wait, "the conflicting extension's status", func() error {
			got := &osmv1alpha1.OperatingSystemProfileExtension{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(bad), got); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, osmv1alpha1.ConditionReady)
			if cond == nil || cond.Status != "False" || cond.Reason != osmv1alpha1.ReasonExtensionConflict {
				return fmt.Errorf("Ready = %+v", cond)
			}
			return nil
		})
		waitRendered(t, content) // nothing overwritten, the Debian machines untouched
		if err := c.Delete(ctx, bad); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "ubuntu OSC ready again", func() error {
			osc := &osmv1alpha1.OperatingSystemConfig{}
			if err := c.Get(ctx, ubuntuOSC, osc); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(osc.Status.Conditions, osmv1alpha1.ConditionReady) {
				return fmt.Errorf("conditions %+v", osc.Status.Conditions)
			}
			return nil
		})
	})

	t.Run("a new default profile version keeps the extension", func(t *testing.T) {
		// A controller that ships the real osp-ubuntu replaces the old one, as an OSM upgrade does.
		stop()
		stop = startStoppable(t, env, nil, app.Options{Builtins: plugins.Builtin(), WorkerCount: 4, Defaults: defaults})
		eventually(t, wait, "ubuntu re-rendered from the upgraded default with the extension", func() error {
			s := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "ubuntu-workers-kube-system-provisioning-config"}, s); err != nil {
				return err
			}
			files := userDataFiles(t, s)
			if _, old := files["/etc/osm-old-default"]; old || files[sysctlPath] != content {
				return fmt.Errorf("old default's file present %v, sysctl %q", old, files[sysctlPath])
			}
			versions["ubuntu-workers"] = s.ResourceVersion
			return nil
		})
	})

	t.Run("deleting the extension removes what it added", func(t *testing.T) {
		if err := c.Delete(ctx, x); err != nil {
			t.Fatal(err)
		}
		waitRendered(t, "")
	})
}

// TestExtensionAdmission sends extensions through the admission webhook of a running controller: one whose
// template does not parse, one that collides with the profile it selects and one that collides with another
// extension are rejected with the field named; the site example is accepted.
func TestExtensionAdmission(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{WebhookInstallOptions: webhookOptions()})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	startOSM(t, env, nil, app.Options{Builtins: plugins.Builtin(), WorkerCount: 2, Defaults: defaults})
	eventually(t, wait, "default profiles installed", func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "osp-ubuntu"}, &osmv1alpha1.OperatingSystemProfile{})
	})
	site := &osmv1alpha1.OperatingSystemProfileExtension{}
	readYAMLFile(t, filepath.Join(testenv.RepoRoot(), "deploy", "examples", "extension-site.yaml"), site)
	site.Namespace = osmNamespace
	eventually(t, webhooks.WarmWait, "creating the site example through the webhook with the plugins loaded", func() error {
		return createFullyChecked(ctx, t, env, site)
	})

	file := func(path, data string) []osmv1alpha1.File {
		return []osmv1alpha1.File{{Path: path, Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: data}}}}
	}
	for _, tc := range []struct {
		name string
		cfg  osmv1alpha1.ExtensionConfig
		want []string
	}{
		{"template does not parse", osmv1alpha1.ExtensionConfig{Files: file("/etc/x", "{{ .Nope ")},
			[]string{"spec.provisioningConfig.files[0]"}},
		{"collides with the profile", osmv1alpha1.ExtensionConfig{Files: file("/etc/containerd/config.toml", "x")},
			[]string{"spec.provisioningConfig.overrides", "/etc/containerd/config.toml", "the profile"}},
		{"collides with another extension", osmv1alpha1.ExtensionConfig{Files: file("/etc/sysctl.d/90-site.conf", "x")},
			[]string{"spec.provisioningConfig.overrides", `"site-baseline"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := &osmv1alpha1.OperatingSystemProfileExtension{}
			x.Name, x.Namespace = "z-bad", osmNamespace
			x.Spec = osmv1alpha1.OperatingSystemProfileExtensionSpec{Selector: osmv1alpha1.ProfileSelector{Names: []string{"osp-ubuntu"}},
				ProvisioningConfig: tc.cfg.DeepCopy()}
			err := c.Create(ctx, x)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("rejection %q does not mention %q", err, w)
				}
			}
		})
	}
}
