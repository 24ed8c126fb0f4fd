package containerd

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// RegistryAuth is the credential of one registry, as in a docker config.json.
type RegistryAuth struct {
	Username      string `json:"username,omitempty" toml:"username,omitempty"`
	Password      string `json:"password,omitempty" toml:"password,omitempty"`
	Auth          string `json:"auth,omitempty" toml:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty" toml:"identitytoken,omitempty"`
}

// ParseDockerConfig reads a kubernetes.io/dockerconfigjson payload ({"auths": {host: {...}}}) and returns the
// credentials per registry host. Only hosts are kept ("https://quay.io/v1/" becomes "quay.io"), because that is
// what containerd matches on.
func ParseDockerConfig(data []byte) (map[string]RegistryAuth, error) {
	var cfg struct {
		Auths map[string]RegistryAuth `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("registry credentials are not a docker config.json: %w", err)
	}
	out := make(map[string]RegistryAuth, len(cfg.Auths))
	for key, a := range cfg.Auths {
		host := key
		host = strings.TrimPrefix(host, "https://")
		host = strings.TrimPrefix(host, "http://")
		host, _, _ = strings.Cut(host, "/")
		if host == "index.docker.io" || host == "registry-1.docker.io" {
			host = "docker.io"
		}
		if a.Auth != "" && a.Username == "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("registry credentials for %s: auth is not base64", host)
			}
			a.Username, a.Password, _ = strings.Cut(string(raw), ":")
		}
		out[host] = a
	}
	return out, nil
}

// AuthTOML returns the config.toml tables holding the registry credentials. It is written into the user-data
// Secret only, in place of Options.AuthPlaceholder.
func AuthTOML(auths map[string]RegistryAuth) (string, error) {
	hosts := make([]string, 0, len(auths))
	for h := range auths {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var buf bytes.Buffer
	for _, h := range hosts {
		fmt.Fprintf(&buf, "[plugins.\"io.containerd.cri.v1.images\".registry.configs.%q.auth]\n", h)
		enc := toml.NewEncoder(&buf)
		if err := enc.Encode(auths[h]); err != nil {
			return "", err
		}
	}
	return buf.String(), nil
}

// ParseAuthTOML reads the tables AuthTOML writes back into the credentials per registry host, for the
// structured per-registry placeholders (abi.SecretPlaceholders.Registries) of formats that list registries
// themselves. Auth is filled from Username and Password when the docker config had none.
func ParseAuthTOML(data string) (map[string]RegistryAuth, error) {
	var doc struct {
		Plugins map[string]struct {
			Registry struct {
				Configs map[string]struct {
					Auth RegistryAuth `toml:"auth"`
				} `toml:"configs"`
			} `toml:"registry"`
		} `toml:"plugins"`
	}
	if _, err := toml.Decode(data, &doc); err != nil {
		return nil, fmt.Errorf("registry credential tables: %w", err)
	}
	out := map[string]RegistryAuth{}
	for host, c := range doc.Plugins["io.containerd.cri.v1.images"].Registry.Configs {
		a := c.Auth
		if a.Auth == "" && a.Username != "" {
			a.Auth = base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password))
		}
		out[host] = a
	}
	return out, nil
}
