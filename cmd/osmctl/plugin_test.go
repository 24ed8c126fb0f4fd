package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/plugintest"
	"github.com/osmhq/osm/sdk/runtime"
)

func TestPluginInspect(t *testing.T) {
	wasm := buildPlugin(t, templatePluginDir, "template.wasm")
	module, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, nil)
	ref := pushTemplate(t, reg, "osm/template:0.1.0")

	t.Run("file, text", func(t *testing.T) {
		out := mustSucceed(t, osmctl(t, "plugin", "inspect", wasm)).stdout
		for _, want := range []string{
			"Name:", "template", "Version:", "0.1.0", "ABI:", "v1",
			"exampleos (1.*)", "Provisioning utilities:  cloud-init\n", "Cloud providers:", "*",
			"Exports:", "osm_metadata, osm_render, osm_validate",
			runtime.Digest(module), "ntpServer", "maxMapCount", "262144",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("inspect output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "osm_encode") || strings.Contains(out, "Manifest digest") {
			t.Errorf("inspect of a file lists what it cannot know:\n%s", out)
		}
	})

	t.Run("OCI reference, json", func(t *testing.T) {
		out := mustSucceed(t, osmctl(t, "plugin", "inspect", "--plain-http", "-o", "json", reg.host+"/osm/template:0.1.0")).stdout
		var got inspection
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		want := &artifactInfo{
			Reference:      ref,
			ManifestDigest: ref[strings.Index(ref, "@")+1:],
			MediaTypes:     oci.MediaTypes{Manifest: "application/vnd.oci.image.manifest.v1+json", Config: oci.MediaTypeWasmConfig, Layer: oci.MediaTypeWasmLayer},
			Annotations: map[string]string{
				annotationTitle: "template", annotationVersion: "0.1.0",
				annotationDescription: "Example plugin: time sync, sysctls and the kubelet bootstrap kubeconfig for exampleos",
			},
		}
		if diff := cmp.Diff(want, got.Artifact); diff != "" {
			t.Errorf("artifact (-want +got):\n%s", diff)
		}
		if got.Name != "template" || got.Module.Digest != runtime.Digest(module) || got.Module.Size != len(module) ||
			!cmp.Equal(got.Exports, []string{abi.ExportMetadata, abi.ExportRender, abi.ExportValidate}) {
			t.Errorf("inspection = %+v", got)
		}
	})
}

func TestPluginRunInput(t *testing.T) {
	wasm := buildPlugin(t, templatePluginDir, "template.wasm")
	fixtures := filepath.Join(templatePluginDir, "testdata")
	for _, name := range []string{"bootstrap", "provisioning"} {
		t.Run(name, func(t *testing.T) {
			r := mustSucceed(t, osmctl(t, "plugin", "run", wasm, "--input", filepath.Join(fixtures, name+".request.json")))
			want, err := os.ReadFile(filepath.Join(fixtures, name+".response.txt"))
			if err != nil {
				t.Fatal(err)
			}
			var resp abi.RenderResponse
			if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil {
				t.Fatalf("plugin run printed no render response: %v\n%s", err, r.stdout)
			}
			if got := plugintest.Format(&resp); got != string(want) {
				t.Errorf("plugin run differs from the template's golden %s.response.txt:\n%s", name, got)
			}
		})
	}

	t.Run("stdin and config override", func(t *testing.T) {
		req, err := os.ReadFile(filepath.Join(fixtures, "provisioning.request.json"))
		if err != nil {
			t.Fatal(err)
		}
		r := mustSucceed(t, osmctlIn(t, bytes.NewReader(req), "plugin", "run", wasm, "-i", "-", "--config", "ntpServer=ntp.lan"))
		if !strings.Contains(r.stdout, `NTP=ntp.lan`) {
			t.Errorf("the --config override did not reach the plugin:\n%s", r.stdout)
		}
	})

	t.Run("plugin error", func(t *testing.T) {
		r := osmctl(t, "plugin", "run", wasm, "--input", filepath.Join(fixtures, "bad-config.request.json"))
		want, err := os.ReadFile(filepath.Join(fixtures, "bad-config.error.txt"))
		if err != nil {
			t.Fatal(err)
		}
		assertOneLineError(t, r, "PluginError", strings.TrimSpace(string(want)))
		if r.stdout != "" {
			t.Errorf("a failed run printed a response: %q", r.stdout)
		}
	})
}

func TestPluginRunMachineDeployment(t *testing.T) {
	wasm := buildPlugin(t, templatePluginDir, "template.wasm")
	// The profile names an image that does not exist: run replaces the profile's plugin with the module under
	// test and keeps its config.
	osp := profileWithImage(t, "registry.invalid/osm/template@sha256:"+strings.Repeat("0", 64))
	for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
		t.Run(string(stage), func(t *testing.T) {
			saved := filepath.Join(t.TempDir(), "request.json")
			r := mustSucceed(t, osmctl(t, "plugin", "run", wasm, "--md", "testdata/md-exampleos.yaml", "--osp", osp,
				"--stage", string(stage), "--save-request", saved))
			var req abi.RenderRequest
			data, err := os.ReadFile(saved)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &req); err != nil {
				t.Fatal(err)
			}
			wantConfig := map[string]string{"ntpServer": "time.example.com", "maxMapCount": "262144"}
			if req.Stage != stage || req.ABIVersion != abi.Version || !cmp.Equal(req.Config, wantConfig) ||
				req.Context.OperatingSystem.Name != "exampleos" || req.Context.Kubelet.Version != "1.33.2" ||
				req.Context.Secrets.BootstrapToken == "" || req.Context.Cluster.ServerURL != "https://api.cluster.example:6443" {
				t.Errorf("the request is not what the controller sends: %s", data)
			}
			if stage == abi.StageBootstrap && req.Input.File("/etc/motd") == nil {
				t.Errorf("the request lacks the bootstrap template output: %s", data)
			}

			var resp abi.RenderResponse
			if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil {
				t.Fatalf("response is not JSON: %v\n%s", err, r.stdout)
			}
			if f := resp.Config.File("/etc/systemd/timesyncd.conf.d/osm.conf"); f == nil || !strings.Contains(f.Content.Inline.Data, "time.example.com") {
				t.Errorf("response lacks the plugin's time sync file: %s", r.stdout)
			}
			// The saved request replays to the same response: it is a ready test fixture.
			replay := mustSucceed(t, osmctl(t, "plugin", "run", wasm, "--input", saved))
			assertSameJSON(t, []byte(r.stdout), []byte(replay.stdout))
		})
	}

	t.Run("config refused by the schema", func(t *testing.T) {
		r := osmctl(t, "plugin", "run", wasm, "--md", "testdata/md-exampleos.yaml", "--osp", osp, "--config", "ntpSever=x")
		assertOneLineError(t, r, "ntpSever")
	})
}

func TestPluginRunPanic(t *testing.T) {
	wasm := buildPlugin(t, panicPluginDir, "panic.wasm")
	req := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(req, []byte(`{"stage":"provisioning","provisioningUtility":"cloud-init","context":{"operatingSystem":{"name":"testos"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := osmctl(t, "plugin", "run", wasm, "--input", req)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != 1 || !strings.HasPrefix(lines[0], `osmctl: plugin "`+wasm+`"`) || !strings.Contains(lines[0], "osm_render failed: Panic") {
		t.Fatalf("want a Panic error line first: %s", r)
	}
	if len(lines) < 3 || !strings.Contains(r.stderr, "plugin stderr:") || !strings.Contains(r.stderr, "goroutine exploded") {
		t.Errorf("want the plugin's stderr (with the panic) after the error line: %s", r)
	}
}

func TestPluginPushPull(t *testing.T) {
	wasm := buildPlugin(t, templatePluginDir, "template.wasm")
	module, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, nil)
	r := mustSucceed(t, osmctl(t, "plugin", "push", "--plain-http", wasm, reg.host+"/osm/template:0.1.0"))
	ref := pinnedRef(t, r.stdout)
	if !strings.HasPrefix(ref, reg.host+"/osm/template@sha256:") || !strings.HasPrefix(r.stdout, ref+"\n") {
		t.Errorf("push must print the pinned reference first:\n%s", r.stdout)
	}
	snippet := "spec:\n  plugin:\n    image: " + ref + "\n    # config:\n" +
		"    #   ntpServer: \"\"  # NTP server the node synchronises its clock with\n" +
		"    #   maxMapCount: \"262144\"  # vm.max_map_count (default)\n"
	if !strings.HasSuffix(r.stdout, snippet) {
		t.Errorf("push output does not end in the spec.plugin snippet %q:\n%s", snippet, r.stdout)
	}

	again := mustSucceed(t, osmctl(t, "plugin", "push", "--plain-http", "-q", wasm, reg.host+"/osm/template:latest"))
	if strings.TrimSpace(again.stdout) != ref {
		t.Errorf("pushing the same module again gave %q, want the same digest %s", again.stdout, ref)
	}

	for _, src := range []string{reg.host + "/osm/template:0.1.0", ref} {
		out := filepath.Join(t.TempDir(), "pulled.wasm")
		p := mustSucceed(t, osmctl(t, "plugin", "pull", "--plain-http", src, "-o", out))
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, module) || strings.TrimSpace(p.stdout) != ref {
			t.Errorf("pull %s: %d bytes (want %d), printed %q (want %s)", src, len(got), len(module), p.stdout, ref)
		}
	}
}

func TestRegistryCredentials(t *testing.T) {
	requireAuth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "robot" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	reg := newRegistry(t, requireAuth)
	wasm := buildPlugin(t, templatePluginDir, "template.wasm")
	dir := t.TempDir()
	config := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.host, base64.StdEncoding.EncodeToString([]byte("robot:s3cret")))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // an empty docker config: anonymous

	r := osmctl(t, "plugin", "push", "--plain-http", wasm, reg.host+"/private/template:1")
	assertOneLineError(t, r, "requires credentials", "--registry-config")

	r = mustSucceed(t, osmctl(t, "plugin", "push", "--plain-http", "-q", "--registry-config", filepath.Join(dir, "config.json"), wasm, reg.host+"/private/template:1"))
	ref := strings.TrimSpace(r.stdout)

	// DOCKER_CONFIG is where the docker CLI (and osmctl without --registry-config) finds credentials.
	t.Setenv("DOCKER_CONFIG", dir)
	mustSucceed(t, osmctl(t, "plugin", "pull", "--plain-http", ref, "-o", filepath.Join(t.TempDir(), "p.wasm")))
	osp := profileWithImage(t, ref)
	mustSucceed(t, osmctl(t, "render", "-f", "testdata/md-exampleos.yaml", "--osp", osp, "--plugin-registry-plain-http"))
	mustSucceed(t, osmctl(t, "lint", "-f", osp, "--plugin-registry-plain-http"))
}

// assertSameJSON compares two JSON documents by value.
func assertSameJSON(t *testing.T, want, got []byte) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want: %v", err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("JSON differs (-want +got):\n%s", diff)
	}
}

// assertOneLineError checks that a run failed with exactly one line on stderr that contains every want. (The
// line starts with "osmctl: ", except for lint, which names the profile file instead.)
func assertOneLineError(t *testing.T, r result, want ...string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("want a failure: %s", r)
	}
	if strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("want exactly one error line on stderr: %s", r)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("error line lacks %q: %s", w, r)
		}
	}
}

func TestRegistryTLS(t *testing.T) {
	reg, ca := newTLSRegistry(t)
	wasm := buildPlugin(t, templatePluginDir, "template.wasm")
	target := reg.host + "/osm/template:0.1.0"

	r := osmctl(t, "plugin", "push", wasm, target)
	assertOneLineError(t, r, "certificate", "--ca-file", "--insecure-skip-tls-verify")

	ref := strings.TrimSpace(mustSucceed(t, osmctl(t, "plugin", "push", "-q", "--ca-file", ca, wasm, target)).stdout)
	mustSucceed(t, osmctl(t, "plugin", "inspect", "--insecure-skip-tls-verify", ref))

	osp := profileWithImage(t, ref)
	r = osmctl(t, "render", "-f", "testdata/md-exampleos.yaml", "--osp", osp)
	assertOneLineError(t, r, "certificate", "--plugin-registry-ca-bundle", "--plugin-registry-insecure")
	mustSucceed(t, osmctl(t, "render", "-f", "testdata/md-exampleos.yaml", "--osp", osp, "--plugin-registry-ca-bundle", ca))
	mustSucceed(t, osmctl(t, "lint", "-f", osp, "--plugin-registry-insecure"))
}

// TestPluginRunDefaultProfile tries a build of a default plugin against its embedded default profile, which
// --md uses when no --osp is given.
func TestPluginRunDefaultProfile(t *testing.T) {
	requireBuiltin(t, "ubuntu")
	module, err := fs.ReadFile(plugins.Builtin(), "ubuntu.wasm")
	if err != nil {
		t.Fatal(err)
	}
	wasm := filepath.Join(t.TempDir(), "ubuntu-dev.wasm")
	if err := os.WriteFile(wasm, module, 0o644); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "request.json")
	r := mustSucceed(t, osmctl(t, "plugin", "run", wasm, "--md", ubuntuMD, "--save-request", saved,
		"-node-binary-base-url", "https://mirror.airgap.lan/k8s"))
	if !strings.Contains(r.stdout, "/opt/bin/osm-setup") || !strings.Contains(r.stdout, "https://mirror.airgap.lan/k8s") {
		t.Errorf("the provisioning response lacks osm-setup with the node flags' binary mirror:\n%.2000s", r.stdout)
	}
	data, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	var req abi.RenderRequest
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatal(err)
	}
	if req.Context.OperatingSystem.Version != "24.04" || req.Config["containerdSource"] == "" {
		t.Errorf("the request was not built from the embedded osp-ubuntu (version, schema defaults): %.1000s", data)
	}
}

// TestPushSnippetListsSecretsAsSecrets: a plugin secret (an option of type secret) is offered as a
// spec.plugin.secrets entry, never as a config key, which the host would refuse.
func TestPushSnippetListsSecretsAsSecrets(t *testing.T) {
	var b strings.Builder
	md := abi.Metadata{Name: "opensuse", Version: "v0.1.0", ConfigSchema: []abi.ConfigOption{
		{Name: "containerdVersion", Default: "2.1.4", Description: "containerd release"},
		{Name: "registration-code", Type: abi.ConfigSecret, Description: "SLES registration code"},
	}}
	if err := writeProfileSnippet(&b, "r@sha256:0", md); err != nil {
		t.Fatal(err)
	}
	want := "    # config:\n    #   containerdVersion: \"2.1.4\"  # containerd release (default)\n" +
		"    # secrets:\n    #   - name: registration-code\n    #     secretRef: {name: <Secret in the profile's namespace>, key: <key>}  # SLES registration code\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("snippet:\n%s\nwant it to end in:\n%s", b.String(), want)
	}
}
