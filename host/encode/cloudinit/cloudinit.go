// Package cloudinit encodes a rendered node configuration as a cloud-init #cloud-config document.
//
// The document is built as data (the Document type) and marshalled, never assembled from YAML text, so content
// with colons, quotes or leading spaces can never change its structure.
package cloudinit

import (
	"bytes"

	"go.yaml.in/yaml/v3"

	"github.com/osmhq/osm/host/nodeconfig"
	"github.com/osmhq/osm/sdk/abi"
)

// Header is the first line cloud-init needs to treat user-data as cloud-config.
const Header = "#cloud-config\n"

// Options are the per-stage settings that do not come from the configuration itself.
type Options struct {
	// Hostname, when set, becomes cloud-init's hostname. machine-controller replaces the placeholder
	// "<MACHINE_NAME>" with the machine's name.
	Hostname string
	// PackageUpgrade upgrades all packages at first boot and reboots if needed (the OS spec's
	// distUpgradeOnBoot).
	PackageUpgrade bool
	// CoreOSUnits writes systemd units in the coreos.units section that Flatcar's coreos-cloudinit reads,
	// instead of files plus systemctl calls in runcmd, which coreos-cloudinit ignores.
	CoreOSUnits bool
}

// Document is the subset of cloud-config OSM writes, in the order it is written.
type Document struct {
	Hostname                string                    `yaml:"hostname,omitempty"`
	PackageUpgrade          bool                      `yaml:"package_upgrade,omitempty"`
	PackageRebootIfRequired bool                      `yaml:"package_reboot_if_required,omitempty"`
	SSHPwauth               *bool                     `yaml:"ssh_pwauth,omitempty"`
	SSHAuthorizedKeys       []string                  `yaml:"ssh_authorized_keys,omitempty"`
	RHSubscription          map[string]any            `yaml:"rh_subscription,omitempty"`
	YumRepoDir              string                    `yaml:"yum_repo_dir,omitempty"`
	YumRepos                map[string]map[string]any `yaml:"yum_repos,omitempty"`
	WriteFiles              []WriteFile               `yaml:"write_files,omitempty"`
	BootCMD                 []string                  `yaml:"bootcmd,omitempty"`
	RunCMD                  []string                  `yaml:"runcmd,omitempty"`
	CoreOS                  *CoreOS                   `yaml:"coreos,omitempty"`
}

// WriteFile is one entry of write_files.
type WriteFile struct {
	Path        string `yaml:"path"`
	Permissions string `yaml:"permissions"`
	Encoding    string `yaml:"encoding,omitempty"`
	Content     string `yaml:"content"`
}

// Build assembles the document for cfg.
func Build(cfg *abi.NodeConfig, opts Options) (*Document, error) {
	doc := &Document{Hostname: opts.Hostname, PackageUpgrade: opts.PackageUpgrade, PackageRebootIfRequired: opts.PackageUpgrade}
	SSHKeys(doc, cfg)
	if err := WriteFiles(doc, cfg); err != nil {
		return nil, err
	}
	if opts.CoreOSUnits {
		CoreOSUnits(doc, cfg)
	} else {
		Units(doc, cfg)
	}
	if err := Modules(doc, cfg); err != nil {
		return nil, err
	}
	return doc, nil
}

// Encode returns the #cloud-config user-data for cfg.
func Encode(cfg *abi.NodeConfig, opts Options) ([]byte, error) {
	if err := nodeconfig.Check(cfg); err != nil {
		return nil, err
	}
	doc, err := Build(cfg, opts)
	if err != nil {
		return nil, err
	}
	return Marshal(doc)
}

// Marshal writes the document with its header.
func Marshal(doc *Document) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(Header)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
