// Package containerd generates containerd's configuration from the controller's node flags: config.toml
// (version 3, containerd 2.x) and one certs.d/<registry>/hosts.toml per registry that has mirrors or is
// insecure, plus docker.io's, which is always written.
//
// The flags mean what they mean to upstream OSM (-node-registry-mirrors, -node-containerd-registry-mirrors,
// -node-insecure-registries) and the files match upstream's byte for byte, so that upstream profiles that
// embed {{ .ContainerRuntimeConfig }} render the same file and nodes pull through the same mirrors. The
// fixtures in testdata/upstream hold upstream's output for every flag form; containerd's own hosts-file
// parser is the judge of what a pull then tries (hosts_containerd_test.go).
package containerd

import (
	"bytes"
	"fmt"

	"github.com/BurntSushi/toml"
)

// Options are the containerd settings the controller's flags give.
type Options struct {
	// PauseImage is the sandbox image; empty keeps containerd's default.
	PauseImage string
	// InsecureRegistries are registries whose TLS certificate is not verified (-node-insecure-registries).
	InsecureRegistries []string
	// RegistryMirrors are the entries of -node-registry-mirrors: a mirror of docker.io, or registry=mirror;
	// a mirror without a scheme gets https://.
	RegistryMirrors []string
	// ContainerdRegistryMirrors are the -node-containerd-registry-mirrors values per registry, in flag order.
	// The registry "*" or "_default" is containerd's catch-all for registries without their own file.
	ContainerdRegistryMirrors map[string][]string
	// DeviceOwnershipFromSecurityContext lets containers use devices with their own UID/GID.
	DeviceOwnershipFromSecurityContext bool
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
				DeviceOwnershipFromSecurityContext: opts.DeviceOwnershipFromSecurityContext,
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
