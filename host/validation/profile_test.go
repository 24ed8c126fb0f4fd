package validation_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/host/validation"
)

func profile(t *testing.T, name string) *osmv1alpha1.OperatingSystemProfile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "crds", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	osp := &osmv1alpha1.OperatingSystemProfile{}
	if err := yaml.UnmarshalStrict(data, osp); err != nil {
		t.Fatal(err)
	}
	return osp
}

func TestUpstreamProfilesAreValid(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "crds", "testdata", "upstream", "osp-*.yaml"))
	if len(files) == 0 {
		t.Fatal("no upstream profiles")
	}
	v := &validation.ProfileValidator{Settings: render.DefaultSettings()}
	for _, f := range files {
		osp := profile(t, filepath.Join("upstream", filepath.Base(f)))
		if errs := v.Validate(context.Background(), osp); len(errs) > 0 {
			t.Errorf("%s: %v", filepath.Base(f), errs.ToAggregate())
		}
	}
}

func TestBrokenProfilesNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*osmv1alpha1.OperatingSystemProfile)
		field  string
		text   string
	}{
		{"version without v", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.Version = "1.0.0" }, "spec.version", "semantic version"},
		{"template does not parse", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = "{{ if .KubeVersion }}unterminated"
		}, "spec.provisioningConfig.files[0].content.inline.data", "unexpected EOF"},
		{"unknown template field", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = "{{ .NoSuchField }}"
		}, "spec.provisioningConfig.files[0].content.inline.data", "NoSuchField"},
		{"named template fails", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.Templates["greeting"] = "{{ .Missing.Field }}"
		}, "spec.provisioningConfig.templates[greeting]", "Missing"},
		{"non-hermetic function", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.BootstrapConfig.Files[0].Content.Inline.Data = `{{ env "HOME" }}`
		}, "spec.bootstrapConfig.files[0].content.inline.data", `function "env" not defined`},
		{"duplicate path", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.BootstrapConfig.Files = append(o.Spec.BootstrapConfig.Files, o.Spec.BootstrapConfig.Files[0])
		}, "spec.bootstrapConfig.files[1].path", "Duplicate value"},
		{"runtime file clashes with section file", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.SupportedContainerRuntimes[0].Files[0].Path = "/etc/motd"
		}, "spec.provisioningConfig.supportedContainerRuntimes[0].files[0].path", "Duplicate value"},
		{"non-octal permissions", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.BootstrapConfig.Files[0].Permissions = ptr.To[int32](798)
		}, "spec.bootstrapConfig.files[0].permissions", "not octal"},
		{"unknown encoding", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.BootstrapConfig.Files[0].Content.Inline.Encoding = "rot13"
		}, "spec.bootstrapConfig.files[0].content.inline.encoding", "Unsupported value"},
		{"unit name without a type", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.BootstrapConfig.Units[0].Name = "bootstrap" },
			"spec.bootstrapConfig.units[0].name", "systemd unit name"},
		{"unit name with a space", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.BootstrapConfig.Units[0].Name = "boot strap.service"
		},
			"spec.bootstrapConfig.units[0].name", "systemd unit name"},
		{"unit name with a command", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.Units[0].Name = "x.service;reboot;.service"
		}, "spec.provisioningConfig.units[0].name", "systemd unit name"},
		{"unit name with ..", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.BootstrapConfig.Units[0].Name = "a..b.service" },
			"spec.bootstrapConfig.units[0].name", "must not contain '..'"},
		{"unit name with a slash", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.BootstrapConfig.Units[0].Name = "../x.service" },
			"spec.bootstrapConfig.units[0].name", "systemd unit name"},
		{"unit name like an option", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.BootstrapConfig.Units[0].Name = "--now.service" },
			"spec.bootstrapConfig.units[0].name", "must not start with '-'"},
		{"unit name with a newline", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.BootstrapConfig.Units[0].Name = "x\n.service" },
			"spec.bootstrapConfig.units[0].name", "systemd unit name"},
		{"drop-in with ..", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.Units[0].DropIns[0].Name = "../../../etc/x.conf"
		}, "spec.provisioningConfig.units[0].dropIns[0].name", "ending in .conf"},
		{"drop-in with a space", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.Units[0].DropIns[0].Name = "a b.conf"
		},
			"spec.provisioningConfig.units[0].dropIns[0].name", "ending in .conf"},
		{"relative path", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.BootstrapConfig.Files[0].Path = "opt/bin/x" },
			"spec.bootstrapConfig.files[0].path", "absolute"},
		{"path with ..", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.BootstrapConfig.Files[0].Path = "/opt/../etc/shadow"
		},
			"spec.bootstrapConfig.files[0].path", "clean path"},
		{"path with .. in a name", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.BootstrapConfig.Files[0].Path = "/opt/..x" },
			"spec.bootstrapConfig.files[0].path", "must not contain '..'"},
		{"path with a space", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.BootstrapConfig.Files[0].Path = "/opt/a b" },
			"spec.bootstrapConfig.files[0].path", "no spaces"},
		{"path with a command", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.SupportedContainerRuntimes[0].Files[0].Path = "/etc/x$(reboot)"
		}, "spec.provisioningConfig.supportedContainerRuntimes[0].files[0].path", "no spaces, quotes, shell characters"},
		{"root as a file", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.BootstrapConfig.Files[0].Path = "/" },
			"spec.bootstrapConfig.files[0].path", "clean path of a file"},
		{"template past the value limit", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = `{{ repeat 3000000000 "x" }}`
		}, "spec.provisioningConfig.files[0].content.inline.data", "over the ValueBytes limit"},
		{"named template loops forever", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.Templates["greeting"] = "{{ range 1000000000 }}{{ range 1000000000 }}{{ end }}{{ end }}"
		}, "spec.provisioningConfig.templates[greeting]", "over the Steps limit"},
		{"template nests too deeply to parse", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.BootstrapConfig.Units[0].Content = nil
			o.Spec.ProvisioningConfig.Templates["greeting"] = strings.Repeat("{{ if 1 }}", 100000) + strings.Repeat("{{ end }}", 100000)
		}, "spec.provisioningConfig.templates[greeting]", "over the Nesting limit"},
		{"unknown utility without plugin", func(o *osmv1alpha1.OperatingSystemProfile) { o.Spec.ProvisioningUtility = "butane" },
			"spec.provisioningUtility", "Unsupported value"},
		{"unresolvable plugin", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "nope"}
		}, "spec.plugin", "no plugin source"},
		{"plugin secret name not a label", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.Plugin = secretRef("Reg_Code", "sles", "code")
		}, "spec.plugin.secrets[0].name", "lower case letters, digits and dashes"},
		{"plugin secret named twice", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.Plugin = secretRef("code", "sles", "code")
			o.Spec.Plugin.Secrets = append(o.Spec.Plugin.Secrets, o.Spec.Plugin.Secrets[0])
		}, "spec.plugin.secrets[1].name", "Duplicate value"},
		{"plugin secret without a Secret", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.Plugin = secretRef("code", "", "code")
		}, "spec.plugin.secrets[0].secretRef.name", "Required value"},
		{"plugin secret with a bad key", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.Plugin = secretRef("code", "sles", "a/b")
		}, "spec.plugin.secrets[0].secretRef.key", "Secret data key"},
		{"plugin secret without a key", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.Plugin = secretRef("code", "sles", "")
		}, "spec.plugin.secrets[0].secretRef.key", "Secret data key"},
		{"too many plugin secrets", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.Plugin = secretRef("code", "sles", "code")
			for i := range 16 {
				o.Spec.Plugin.Secrets = append(o.Spec.Plugin.Secrets, osmv1alpha1.PluginSecret{Name: fmt.Sprintf("s%d", i),
					SecretRef: osmv1alpha1.PluginSecretKeyRef{Name: "sles", Key: "code"}})
			}
		}, "spec.plugin.secrets", "must have at most 16 items"},
		{"secrets on a pipeline plugin", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.Plugins = []osmv1alpha1.PluginReference{*secretRef("code", "sles", "code")}
		}, "spec.plugins[0].secrets", "only spec.plugin takes secrets"},
		{"bootstrap too large", func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.BootstrapConfig.Files[0].Content.Inline.Data = strings.Repeat("x", 20000)
		}, "spec.supportedCloudProviders[0]", "bootstrap user-data is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			osp := profile(t, "osp-minimal.yaml")
			tc.mutate(osp)
			errs := (&validation.ProfileValidator{Settings: render.DefaultSettings()}).Validate(context.Background(), osp)
			if len(errs) == 0 {
				t.Fatal("accepted")
			}
			msg := errs.ToAggregate().Error()
			if !strings.Contains(msg, tc.field) || !strings.Contains(msg, tc.text) {
				t.Errorf("errors do not name %q with %q:\n%s", tc.field, tc.text, msg)
			}
		})
	}
}

func secretRef(name, secret, key string) *osmv1alpha1.PluginReference {
	return &osmv1alpha1.PluginReference{Builtin: "nope", Secrets: []osmv1alpha1.PluginSecret{
		{Name: name, SecretRef: osmv1alpha1.PluginSecretKeyRef{Name: secret, Key: key}}}}
}

func TestValidateUpdateNeedsVersionBump(t *testing.T) {
	old := profile(t, "osp-minimal.yaml")
	changed := old.DeepCopy()
	changed.Spec.OSVersion = "24.04"
	if errs := validation.ValidateUpdate(old, changed); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "spec.version") {
		t.Errorf("spec change without version bump accepted: %v", errs)
	}
	changed.Spec.Version = "v1.0.1"
	if errs := validation.ValidateUpdate(old, changed); len(errs) > 0 {
		t.Errorf("bumped change rejected: %v", errs)
	}
	down := old.DeepCopy()
	down.Spec.Version = "v0.9.0"
	if errs := validation.ValidateUpdate(old, down); len(errs) == 0 {
		t.Error("downgrade accepted")
	}
	meta := old.DeepCopy()
	meta.Labels = map[string]string{"x": "y"}
	if errs := validation.ValidateUpdate(old, meta); len(errs) > 0 {
		t.Errorf("metadata-only change rejected: %v", errs)
	}
}
