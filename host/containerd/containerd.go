// Package containerd generates containerd's configuration from the controller's node flags: config.toml
// (version 3, containerd 2.x) and one certs.d/<registry>/hosts.toml per registry that has mirrors or is
// insecure.
//
// The output matches upstream OSM's byte for byte for the same flags, so that upstream profiles that embed
// {{ .ContainerRuntimeConfig }} render the same file.
package containerd

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Options are the containerd settings the controller's flags give.
type Options struct {
	// PauseImage is the sandbox image; empty keeps containerd's default.
	PauseImage string
	// InsecureRegistries are registries whose TLS certificate is not verified.
	InsecureRegistries []string
	// RegistryMirrors are mirrors for docker.io.
	RegistryMirrors []string
	// ContainerdRegistryMirrors are mirrors per registry host.
	ContainerdRegistryMirrors map[string][]string
	// AuthPlaceholder, when set, is written at the end of config.toml where the registry credentials go. The
	// caller substitutes it with AuthTOML when it writes the user-data Secret.
	AuthPlaceholder string
}

// CertsDir is where containerd looks for per-registry hosts.toml files.
const CertsDir = "/etc/containerd/certs.d"

type config struct {
	Version int                    `toml:"version"`
	Metrics metrics                `toml:"metrics"`
	Plugins map[string]interface{} `toml:"plugins"`
}

type metrics struct {
	Address string `toml:"address"`
}

type imagesPlugin struct {
	DiscardUnpackedLayers bool          `toml:"discard_unpacked_layers"`
	PinnedImages          *pinnedImages `toml:"pinned_images,omitempty"`
	Registry              registry      `toml:"registry"`
}

type pinnedImages struct {
	Sandbox string `toml:"sandbox"`
}

type registry struct {
	ConfigPath string `toml:"config_path"`
}

type runtimePlugin struct {
	DeviceOwnershipFromSecurityContext bool              `toml:"device_ownership_from_security_context"`
	Containerd                         runtimeContainerd `toml:"containerd"`
	CNI                                cni               `toml:"cni"`
}

type runtimeContainerd struct {
	Runtimes map[string]runtime `toml:"runtimes"`
}

type runtime struct {
	RuntimeType string         `toml:"runtime_type"`
	Options     map[string]any `toml:"options"`
}

type cni struct {
	BinDirs []string `toml:"bin_dirs"`
	ConfDir string   `toml:"conf_dir"`
}

// ConfigTOML returns /etc/containerd/config.toml.
func ConfigTOML(opts Options) (string, error) {
	images := imagesPlugin{Registry: registry{ConfigPath: CertsDir}}
	if opts.PauseImage != "" {
		images.PinnedImages = &pinnedImages{Sandbox: opts.PauseImage}
	}
	cfg := config{
		Version: 3,
		Metrics: metrics{Address: "127.0.0.1:1338"},
		Plugins: map[string]interface{}{
			"io.containerd.cri.v1.images": images,
			"io.containerd.cri.v1.runtime": runtimePlugin{
				Containerd: runtimeContainerd{Runtimes: map[string]runtime{
					"runc": {RuntimeType: "io.containerd.runc.v2", Options: map[string]any{"SystemdCgroup": true}},
				}},
				CNI: cni{BinDirs: []string{"/opt/cni/bin"}, ConfDir: "/etc/cni/net.d"},
			},
		},
	}
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.Indent = ""
	if err := enc.Encode(cfg); err != nil {
		return "", fmt.Errorf("encoding containerd config: %w", err)
	}
	if opts.AuthPlaceholder != "" {
		buf.WriteString(opts.AuthPlaceholder + "\n")
	}
	return buf.String(), nil
}

// HostsFile is the hosts.toml of one registry.
type HostsFile struct {
	Registry string
	Path     string
	Content  string
}

// HostsFiles returns one hosts.toml per registry that is insecure or has mirrors, sorted by registry.
func HostsFiles(opts Options) []HostsFile {
	type hostCfg struct {
		mirrors  []string
		insecure bool
	}
	hosts := map[string]*hostCfg{}
	get := func(r string) *hostCfg {
		if hosts[r] == nil {
			hosts[r] = &hostCfg{}
		}
		return hosts[r]
	}
	for _, r := range opts.InsecureRegistries {
		get(r).insecure = true
	}
	if len(opts.RegistryMirrors) > 0 {
		get("docker.io").mirrors = append(get("docker.io").mirrors, opts.RegistryMirrors...)
	}
	for r, mirrors := range opts.ContainerdRegistryMirrors {
		get(r).mirrors = append(get(r).mirrors, mirrors...)
	}

	names := make([]string, 0, len(hosts))
	for r := range hosts {
		names = append(names, r)
	}
	sort.Strings(names)
	out := make([]HostsFile, 0, len(names))
	for _, r := range names {
		h := hosts[r]
		var b strings.Builder
		fmt.Fprintf(&b, "server = %q\n", server(r))
		for _, m := range h.mirrors {
			fmt.Fprintf(&b, "\n[host.%q]\ncapabilities = [\"pull\", \"resolve\"]\n", m)
			if h.insecure {
				b.WriteString("skip_verify = true\n")
			}
		}
		if len(h.mirrors) == 0 {
			// An insecure registry without mirrors is its own host.
			fmt.Fprintf(&b, "\n[host.%q]\ncapabilities = [\"pull\", \"resolve\"]\nskip_verify = true\n", r)
		}
		out = append(out, HostsFile{Registry: r, Path: CertsDir + "/" + r + "/hosts.toml", Content: b.String()})
	}
	return out
}

// server is the upstream endpoint of a registry as containerd's hosts.toml wants it. Docker Hub's API lives on
// another host than its name; other registries are written as given, which keeps host:port registries reachable
// over whatever scheme containerd negotiates.
func server(registry string) string {
	if registry == "docker.io" {
		return "https://registry-1.docker.io"
	}
	return registry
}
