package templates_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/templates"
)

func file(path, data string) osmv1alpha1.File {
	return osmv1alpha1.File{Path: path, Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: data}}}
}

func TestRenderStageSemantics(t *testing.T) {
	cfg := &osmv1alpha1.OSPConfig{
		Templates: map[string]string{
			"greet": "hello {{ .Name }}\n\n",
			"both":  "from section",
		},
		Files: []osmv1alpha1.File{
			file("/a", "start{{- template \"greet\" . }}\nend"),
			file("/b", `{{ template "both" }} {{ template "rt" }}`),
			file("/own", `{{ define "local" }}L{{ end }}{{ template "local" }}{{ template "greet" }}`),
		},
		SupportedContainerRuntimes: []osmv1alpha1.ContainerRuntimeSpec{
			{Name: "docker", Files: []osmv1alpha1.File{file("/docker", "no")}},
			{Name: "containerd", Files: []osmv1alpha1.File{file("/etc/containerd/config.toml", "{{ .Name }}")},
				Templates: map[string]string{"both": "from runtime", "rt": "runtime only"}},
		},
		Units: []osmv1alpha1.Unit{{Name: "x.service", Content: ptr.To("{{ not rendered }}")}},
	}
	out, err := templates.RenderStage(context.Background(), "spec.provisioningConfig", cfg, "containerd", map[string]string{"Name": "world"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var paths []string
	for _, f := range out.Files {
		got[f.Path] = f.Content.Inline.Data
		paths = append(paths, f.Path)
		if *f.Permissions != 644 {
			t.Errorf("%s: permissions %d, want the 644 default", f.Path, *f.Permissions)
		}
	}
	want := map[string]string{
		// A named template is executed first; what {{ template }} inserts starts with a newline and has trailing
		// whitespace trimmed, exactly as upstream OSM wraps them.
		"/a": "start\nhello world\nend",
		// The section's template wins over the runtime's of the same name; runtime-only templates are visible.
		"/b":                          "\nfrom section \nruntime only",
		"/own":                        "L\nhello world",
		"/etc/containerd/config.toml": "world",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/a", "/b", "/own", "/etc/containerd/config.toml"}, paths); diff != "" {
		t.Errorf("order: section files first, then the runtime's (-want +got):\n%s", diff)
	}
	if *out.Units[0].Content != "{{ not rendered }}" {
		t.Errorf("units must be copied verbatim, as upstream does: %q", *out.Units[0].Content)
	}
}

func TestRenderStageErrorsNameTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  osmv1alpha1.OSPConfig
		want string
	}{
		"file": {osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{file("/ok", "x"), file("/bad", "line1\n{{ .Missing }}")}},
			"spec.provisioningConfig.files[1].content.inline.data (/bad): template: /bad:2:3: executing \"/bad\" at <.Missing>"},
		"named": {osmv1alpha1.OSPConfig{Templates: map[string]string{"t": "{{ fail \"boom\" }}"}},
			"spec.provisioningConfig.templates[t]: template: t:1:3: executing \"t\" at <fail \"boom\">: error calling fail: boom"},
		"runtime file": {osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{file("/ok", "x")},
			SupportedContainerRuntimes: []osmv1alpha1.ContainerRuntimeSpec{{Name: "containerd", Files: []osmv1alpha1.File{file("/rt", "{{ if }}")}}}},
			"spec.provisioningConfig.supportedContainerRuntimes[containerd].files[0].content.inline.data (/rt)"},
		"non-hermetic": {osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{file("/now", "{{ now }}")}}, `function "now" not defined`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := templates.RenderStage(context.Background(), "spec.provisioningConfig", &tc.cfg, "containerd", struct{ Name string }{"x"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestConversions(t *testing.T) {
	cfg := &osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{
		file("/y", `{{ dict "b" 1 "a" (list "x" "y") | toYaml }}`),
		file("/j", `{{ (fromJson "{\"k\": [1, 2]}").k | toJson }}`),
		file("/t", `{{ dict "server" "https://r" "port" 5000 | toToml }}`),
		file("/ry", `{{ (fromYaml "a: {b: c}").a.b }}`),
	}}
	out, err := templates.RenderStage(context.Background(), "s", cfg, "containerd", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a:\n- x\n- \"y\"\nb: 1", "[1,2]", "port = 5000\nserver = 'https://r'", "c"}
	for i, w := range want {
		if got := out.Files[i].Content.Inline.Data; got != w {
			t.Errorf("%s = %q, want %q", out.Files[i].Path, got, w)
		}
	}
}
