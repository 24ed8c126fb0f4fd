package oci

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// requireBasicAuth makes a registry answer 401 unless the request carries robot:s3cret.
func requireBasicAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "robot" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writeCredentialHelper installs docker-credential-osmtest on PATH; it has robot:s3cret for host only.
func writeCredentialHelper(t *testing.T, host string) {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
[ "$1" = get ] || exit 1
read -r server
if [ "$server" != "` + host + `" ]; then echo "credentials not found in native keychain"; exit 1; fi
printf '{"ServerURL":"%s","Username":"robot","Secret":"s3cret"}' "$server"
`
	if err := os.WriteFile(filepath.Join(dir, "docker-credential-osmtest"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultDockerConfigFile(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", "/etc/docker-cfg")
	if got := DefaultDockerConfigFile(); got != "/etc/docker-cfg/config.json" {
		t.Errorf("with DOCKER_CONFIG: %q", got)
	}
	t.Setenv("DOCKER_CONFIG", "")
	t.Setenv("HOME", "/home/op")
	if got := DefaultDockerConfigFile(); got != "/home/op/.docker/config.json" {
		t.Errorf("without DOCKER_CONFIG: %q", got)
	}
}

func TestDockerConfigFile(t *testing.T) {
	reg := newRegistry(t, false, requireBasicAuth)
	basic := base64.StdEncoding.EncodeToString([]byte("robot:s3cret"))
	tests := []struct {
		name   string
		config string
		helper bool
	}{
		{name: "auths", config: fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.host, basic)},
		{name: "credential helper", config: fmt.Sprintf(`{"credHelpers":{%q:"osmtest"}}`, reg.host), helper: true},
		{name: "credentials store", config: `{"credsStore":"osmtest"}`, helper: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.helper {
				writeCredentialHelper(t, reg.host)
			}
			ctx := context.Background()
			file := writeFile(t, tt.config)
			c := reg.client(t, Options{DockerConfigFile: file})
			a, err := c.Push(ctx, reg.host+"/private/p:1", fakeModule(tt.name), nil)
			if err != nil {
				t.Fatalf("push with credentials from the file: %v", err)
			}

			// The same credentials, flattened into config content, as a pull Secret would carry them.
			content, err := DockerConfigFor(ctx, file, reg.host, "other.example.com")
			if err != nil {
				t.Fatal(err)
			}
			var parsed struct {
				Auths map[string]authEntry `json:"auths"`
			}
			if err := json.Unmarshal(content, &parsed); err != nil {
				t.Fatal(err)
			}
			if len(parsed.Auths) != 1 || parsed.Auths[reg.host].Auth != basic {
				t.Errorf("DockerConfigFor() = %s, want only %s with robot:s3cret", content, reg.host)
			}
			pulled, err := reg.client(t, Options{DockerConfig: content}).Pull(ctx, a.Reference)
			if err != nil {
				t.Fatalf("pull with the flattened config: %v", err)
			}
			want := MediaTypes{Manifest: ocispec.MediaTypeImageManifest, Config: MediaTypeWasmConfig, Layer: MediaTypeWasmLayer}
			if pulled.MediaTypes != want || a.MediaTypes != want {
				t.Errorf("media types: pushed %+v, pulled %+v, want %+v", a.MediaTypes, pulled.MediaTypes, want)
			}
		})
	}
}

func TestDockerConfigFileErrors(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "absent", "config.json")
	content, err := DockerConfigFor(ctx, missing, "registry.example.com")
	if err != nil || string(content) != `{"auths":{}}` {
		t.Errorf("missing file: %s, %v; want an empty config", content, err)
	}
	if _, err := NewClient(Options{DockerConfigFile: missing}); err != nil {
		t.Errorf("NewClient with a missing docker config file: %v", err)
	}
	bad := writeFile(t, "{not json")
	if _, err := DockerConfigFor(ctx, bad, "registry.example.com"); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("malformed file: err = %v, want one naming the file", err)
	}
	if _, err := NewClient(Options{DockerConfigFile: bad}); err == nil {
		t.Error("NewClient accepted a malformed docker config file")
	}
	helperless := writeFile(t, `{"credHelpers":{"registry.example.com":"osm-no-such-helper"}}`)
	if _, err := DockerConfigFor(ctx, helperless, "registry.example.com"); err == nil {
		t.Error("DockerConfigFor succeeded although the credential helper does not exist")
	}
}
