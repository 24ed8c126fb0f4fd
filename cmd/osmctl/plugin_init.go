package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"text/template"

	"github.com/spf13/cobra"

	"github.com/osmhq/osm/sdk"
)

//go:embed scaffold/*.tmpl
var scaffoldFS embed.FS

// sdkModule is the SDK's module path.
const sdkModule = "github.com/osmhq/osm/sdk"

// scaffold is what the templates of a new plugin module are filled with.
type scaffold struct {
	Name, Module, OSVersion, Family, Image string
	Providers                              []string
}

// scaffoldFiles maps each template to the file it becomes.
var scaffoldFiles = map[string]string{
	"main.go.tmpl":                "main.go",
	"plugin.go.tmpl":              "plugin.go",
	"plugin_test.go.tmpl":         "plugin_test.go",
	"Makefile.tmpl":               "Makefile",
	"workflow.yaml.tmpl":          ".github/workflows/plugin.yaml",
	"osp.yaml.tmpl":               "osp.yaml",
	"machinedeployment.yaml.tmpl": "machinedeployment.yaml",
	"README.md.tmpl":              "README.md",
}

func newPluginInitCommand(*pluginCommon) *cobra.Command {
	s := scaffold{}
	var dir, sdkVersion, sdkDir string
	cmd := &cobra.Command{
		Use:   "init NAME",
		Short: "Scaffold a plugin module that builds, tests and renders out of the box.",
		Long: `init writes a Go module for a new OS plugin named NAME (the OSP osName) into a new directory (default
./NAME): the plugin on the SDK's node kit, tests with the SDK's harness (cloud-init schema, boot contract,
golden files, the module in the sandbox), a Makefile (build, test, golden, render, lint, push), a GitHub
Actions workflow, a profile and a sample MachineDeployment.

The module requires the SDK this osmctl was built with (--sdk-version overrides it); --sdk-dir points it at a
local SDK checkout instead (a replace directive), for osmctl built from source.`,
		Example: `  osmctl plugin init opensuse --os-version 15.6 --image registry.example.com/osm/opensuse
  cd opensuse && make test render`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s.Name = args[0]
			if dir == "" {
				dir = s.Name
			}
			if s.Module == "" {
				s.Module = "example.com/osm-plugins/" + s.Name
			}
			if s.Image == "" {
				s.Image = "localhost:5000/osm/" + s.Name
			}
			if err := s.check(); err != nil {
				return err
			}
			if err := writeScaffold(dir, s, sdkVersion, sdkDir); err != nil {
				return err
			}
			next := "make test render"
			if sdkDir == "" {
				// go.sum has the checksums of the SDK's dependencies but not of the SDK itself.
				next = "go mod tidy && " + next
			}
			cmd.PrintErrf("osmctl: wrote plugin module %s (%s) to %s; next: cd %s && %s\n", s.Module, s.Name, dir, dir, next)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "Directory to create (default: ./NAME); it must not exist.")
	f.StringVar(&s.Module, "module", "", "Go module path (default: example.com/osm-plugins/NAME).")
	f.StringVar(&s.OSVersion, "os-version", "1", "OS version the plugin renders for (OSP osVersion).")
	f.StringVar(&s.Family, "family", "apt", "Distribution family to start from: apt (Debian-like), dnf (Red Hat-like), both provisioned by cloud-init, ignition (image-based, provisioned by Ignition: Fedora CoreOS, Flatcar, MicroOS), or format (a user-data format of the plugin's own, e.g. a TOML settings document, joining from settings).")
	f.StringVar(&s.Image, "image", "", "Image repository the plugin is pushed to (default: localhost:5000/osm/NAME).")
	f.StringSliceVar(&s.Providers, "cloud-providers", []string{"aws", "azure", "gce", "hetzner", "openstack", "vsphere"}, "Cloud providers the plugin supports.")
	f.StringVar(&sdkVersion, "sdk-version", "", "SDK version to require (default: the one osmctl was built with).")
	f.StringVar(&sdkDir, "sdk-dir", "", "Local SDK directory (the sdk/ of an OSM checkout) to use through a replace directive.")
	return cmd
}

// Utility is the provisioning utility of the family: the format family's is the plugin's own, NAME-settings.
func (s scaffold) Utility() string {
	switch s.Family {
	case "ignition":
		return "ignition"
	case "format":
		return s.Name + "-settings"
	}
	return "cloud-init"
}

func (s scaffold) check() error {
	switch {
	case !isDNSLabel(s.Name):
		return fmt.Errorf("plugin name %q: use lower case letters, digits and dashes (it is the OSP osName)", s.Name)
	case s.Family != "apt" && s.Family != "dnf" && s.Family != "ignition" && s.Family != "format":
		return fmt.Errorf("--family %q: want apt or dnf (cloud-init; for another package manager, start from apt and replace Install; see sdk/examples/opensuse), ignition (Fedora CoreOS, Flatcar, MicroOS), or format (a user-data format of the plugin's own)", s.Family)
	case len(s.Providers) == 0:
		return errors.New("--cloud-providers: name at least one")
	case strings.ContainsAny(s.OSVersion, "\"\\\n") || s.OSVersion == "":
		return fmt.Errorf("--os-version %q is not a version", s.OSVersion)
	case strings.ContainsAny(s.Module+s.Image, " \"\\\n"):
		return errors.New("--module and --image must not contain spaces, quotes or backslashes")
	}
	for _, p := range s.Providers {
		if !isDNSLabel(p) {
			return fmt.Errorf("--cloud-providers: %q is not a provider name", p)
		}
	}
	return nil
}

func isDNSLabel(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

func writeScaffold(dir string, s scaffold, sdkVersion, sdkDir string) error {
	goMod, err := scaffoldGoMod(s.Module, sdkVersion, sdkDir, dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists; choose another --dir", dir)
	}
	files := map[string][]byte{"go.mod": goMod, "go.sum": sdk.GoSum, ".gitignore": []byte("/" + s.Name + ".wasm\n")}
	for tmpl, out := range scaffoldFiles {
		text, err := scaffoldFS.ReadFile("scaffold/" + tmpl)
		if err != nil {
			return err
		}
		t, err := template.New(tmpl).Delims("[[", "]]").Option("missingkey=error").Parse(string(text))
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, s); err != nil {
			return fmt.Errorf("scaffold %s: %w", out, err)
		}
		files[out] = b.Bytes()
	}
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(dir, "testdata"), 0o755)
}

// scaffoldGoMod writes the plugin's go.mod: the SDK, and the SDK's own requirements as indirect ones, so the
// module builds offline from a module cache that built the SDK, with the checksums of the SDK's go.sum.
func scaffoldGoMod(module, version, sdkDir, dir string) ([]byte, error) {
	goVersion, requires := parseGoMod(sdk.GoMod)
	if version == "" && sdkDir == "" {
		version = builtSDKVersion()
		if version == "" {
			return nil, errors.New("this osmctl was built from an SDK source tree, not a released SDK version: pass --sdk-dir <osm checkout>/sdk or --sdk-version vX.Y.Z")
		}
	}
	if version == "" {
		version = "v0.0.0"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module %s\n\ngo %s\n\nrequire %s %s\n", module, goVersion, sdkModule, version)
	if len(requires) > 0 {
		b.WriteString("\nrequire (\n")
		for _, r := range requires {
			fmt.Fprintf(&b, "\t%s // indirect\n", r)
		}
		b.WriteString(")\n")
	}
	if sdkDir != "" {
		abs, err := filepath.Abs(sdkDir)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
			return nil, fmt.Errorf("--sdk-dir %s: no go.mod there (want the sdk/ directory of an OSM checkout)", sdkDir)
		}
		target, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		if rel, err := filepath.Rel(target, abs); err == nil {
			abs = rel
			if !strings.HasPrefix(abs, ".") {
				abs = "./" + abs
			}
		}
		fmt.Fprintf(&b, "\nreplace %s => %s\n", sdkModule, filepath.ToSlash(abs))
	}
	return []byte(b.String()), nil
}

// parseGoMod returns the go version and the "path version" requirements of a go.mod.
func parseGoMod(data []byte) (goVersion string, requires []string) {
	inBlock := false
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.Split(line, "//")[0])
		switch {
		case strings.HasPrefix(line, "go "):
			goVersion = strings.TrimSpace(strings.TrimPrefix(line, "go "))
		case line == "require (":
			inBlock = true
		case inBlock && line == ")":
			inBlock = false
		case inBlock && line != "":
			requires = append(requires, line)
		case strings.HasPrefix(line, "require "):
			requires = append(requires, strings.TrimSpace(strings.TrimPrefix(line, "require ")))
		}
	}
	return goVersion, requires
}

// builtSDKVersion is the SDK version osmctl was built with, "" for a build from a source tree (a replace).
func builtSDKVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == sdkModule && d.Replace == nil && d.Version != "(devel)" && d.Version != "v0.0.0" {
			return d.Version
		}
	}
	return ""
}
