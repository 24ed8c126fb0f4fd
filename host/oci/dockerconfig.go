package oci

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
)

// DefaultDockerConfigFile returns the file the docker CLI keeps registry credentials in:
// $DOCKER_CONFIG/config.json when DOCKER_CONFIG is set, ~/.docker/config.json otherwise ("" when there is no
// home directory either).
func DefaultDockerConfigFile() string {
	if dir := os.Getenv("DOCKER_CONFIG"); dir != "" {
		return filepath.Join(dir, "config.json")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".docker", "config.json")
}

// dockerConfigStore reads a docker config file the way the docker CLI does: per-registry credential helpers
// (credHelpers), then the credentials store (credsStore), then the file's own auths. A missing file has no
// credentials.
func dockerConfigStore(file string) (credentials.Store, error) {
	store, err := credentials.NewStore(file, credentials.StoreOptions{})
	if err != nil {
		return nil, fmt.Errorf("registry credentials %s: %w", file, err)
	}
	return store, nil
}

// authEntry is one entry of a docker config's auths.
type authEntry struct {
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// DockerConfigFor returns a self-contained docker config.json (only "auths") with the credentials the docker
// config file has for registries (hosts such as "registry.example.com:5000"), resolved through its credential
// helpers. It is for code that takes config content rather than a file, such as a pull Secret's
// .dockerconfigjson. Registries without credentials are left out; a missing file gives an empty config.
func DockerConfigFor(ctx context.Context, file string, registries ...string) ([]byte, error) {
	store, err := dockerConfigStore(file)
	if err != nil {
		return nil, err
	}
	auths := map[string]authEntry{}
	sort.Strings(registries)
	for _, reg := range registries {
		addr := credentials.ServerAddressFromRegistry(reg)
		cred, err := store.Get(ctx, addr)
		if err != nil {
			return nil, fmt.Errorf("registry credentials for %s from %s: %w", reg, file, err)
		}
		if cred == auth.EmptyCredential {
			continue
		}
		e := authEntry{IdentityToken: cred.RefreshToken, RegistryToken: cred.AccessToken}
		if cred.Username != "" || cred.Password != "" {
			e.Auth = base64.StdEncoding.EncodeToString([]byte(cred.Username + ":" + cred.Password))
		}
		auths[addr] = e
	}
	return json.Marshal(struct {
		Auths map[string]authEntry `json:"auths"`
	}{auths})
}
