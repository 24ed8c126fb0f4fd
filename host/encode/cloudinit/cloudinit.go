// Package cloudinit encodes a rendered node configuration as a cloud-init #cloud-config document.
//
// The document is built as data (the Document type) and marshalled, never assembled from YAML text, so content
// with colons, quotes or leading spaces can never change its structure.
package cloudinit

import (
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

// Marshal writes the document with its header, fields in the order of Document (yaml.go says how).
func Marshal(doc *Document) ([]byte, error) {
	w := &yamlWriter{buf: make([]byte, 0, sizeHint(doc))}
	w.buf = append(w.buf, Header...)
	if doc.Hostname != "" {
		w.stringEntry(0, "hostname", doc.Hostname)
	}
	if doc.PackageUpgrade {
		w.boolEntry(0, "package_upgrade", true)
	}
	if doc.PackageRebootIfRequired {
		w.boolEntry(0, "package_reboot_if_required", true)
	}
	if doc.SSHPwauth != nil {
		w.boolEntry(0, "ssh_pwauth", *doc.SSHPwauth)
	}
	if len(doc.SSHAuthorizedKeys) > 0 {
		w.stringList(0, "ssh_authorized_keys", doc.SSHAuthorizedKeys)
	}
	if len(doc.RHSubscription) > 0 {
		if err := w.anyMap(0, "rh_subscription", doc.RHSubscription); err != nil {
			return nil, err
		}
	}
	if doc.YumRepoDir != "" {
		w.stringEntry(0, "yum_repo_dir", doc.YumRepoDir)
	}
	if len(doc.YumRepos) > 0 {
		w.blockKey(0, "yum_repos")
		for _, name := range abi.SortedKeys(doc.YumRepos) {
			if err := w.anyMap(2, name, doc.YumRepos[name]); err != nil {
				return nil, err
			}
		}
	}
	if len(doc.WriteFiles) > 0 {
		w.blockKey(0, "write_files")
		for _, f := range doc.WriteFiles {
			w.firstEntry(2, "path", f.Path)
			w.stringEntry(4, "permissions", f.Permissions)
			if f.Encoding != "" {
				w.stringEntry(4, "encoding", f.Encoding)
			}
			w.stringEntry(4, "content", f.Content)
		}
	}
	if len(doc.BootCMD) > 0 {
		w.stringList(0, "bootcmd", doc.BootCMD)
	}
	if len(doc.RunCMD) > 0 {
		w.stringList(0, "runcmd", doc.RunCMD)
	}
	if doc.CoreOS != nil && len(doc.CoreOS.Units) > 0 {
		w.coreOSUnits(doc.CoreOS.Units)
	}
	return w.buf, nil
}

// coreOSUnits writes the coreos section.
func (w *yamlWriter) coreOSUnits(units []CoreOSUnit) {
	w.buf = append(w.buf, "coreos:\n"...)
	w.blockKey(2, "units")
	for _, u := range units {
		w.firstEntry(4, "name", u.Name)
		if u.Enable {
			w.boolEntry(6, "enable", true)
		}
		if u.Mask {
			w.boolEntry(6, "mask", true)
		}
		if u.Command != "" {
			w.stringEntry(6, "command", u.Command)
		}
		if u.Content != "" {
			w.stringEntry(6, "content", u.Content)
		}
		if len(u.DropIns) > 0 {
			w.blockKey(6, "drop-ins")
			for _, d := range u.DropIns {
				w.firstEntry(8, "name", d.Name)
				w.stringEntry(10, "content", d.Content)
			}
		}
	}
}

// sizeHint is a little more than the document's size when most of it is file content, as it is for every
// profile, so the buffer is allocated once.
func sizeHint(doc *Document) int {
	n := 1024
	for _, f := range doc.WriteFiles {
		n += len(f.Path) + len(f.Content) + len(f.Content)/16 + 64 // indentation of a block's lines
	}
	for _, c := range doc.RunCMD {
		n += len(c) + 8
	}
	return n
}
