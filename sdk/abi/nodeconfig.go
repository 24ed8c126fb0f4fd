package abi

import (
	"sort"
)

// NodeConfig is a rendered stage: the files, units, cloud-init modules and SSH keys of a node. Its JSON shape
// matches the OperatingSystemConfig's bootstrapConfig/provisioningConfig, so the host stores it unchanged.
type NodeConfig struct {
	Files       []File   `json:"files,omitempty"`
	Units       []Unit   `json:"units,omitempty"`
	UserSSHKeys []string `json:"userSSHKeys,omitempty"`
	Modules     *Modules `json:"modules,omitempty"`
}

// File is a file written on the node.
type File struct {
	Path string `json:"path"`
	// Permissions are mode bits written as decimal digits read as octal: 644 means 0644.
	Permissions *int32      `json:"permissions,omitempty"`
	Content     FileContent `json:"content"`
}

// FileContent holds a file's data.
type FileContent struct {
	Inline *FileContentInline `json:"inline,omitempty"`
}

// FileContentInline is a file's content. Data is always the plain content; Encoding ("" , "b64", "base64",
// "gzip", "gz+base64", ...) only says how the content travels inside cloud-config user-data, as in upstream OSM.
type FileContentInline struct {
	Encoding string `json:"encoding,omitempty"`
	Data     string `json:"data"`
}

// Unit is a systemd unit.
type Unit struct {
	Name    string   `json:"name"`
	Enable  *bool    `json:"enable,omitempty"`
	Mask    *bool    `json:"mask,omitempty"`
	Content *string  `json:"content,omitempty"`
	DropIns []DropIn `json:"dropIns,omitempty"`
}

// DropIn is a systemd drop-in.
type DropIn struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

// Modules are the cloud-init modules OSM supports. Ignition has no equivalent; the host turns bootcmd and
// runcmd into a oneshot unit there.
type Modules struct {
	BootCMD        []string                     `json:"bootcmd,omitempty"`
	RHSubscription map[string]string            `json:"rh_subscription,omitempty"`
	RunCMD         []string                     `json:"runcmd,omitempty"`
	YumRepos       map[string]map[string]string `json:"yum_repos,omitempty"`
	YumRepoDir     string                       `json:"yum_repo_dir,omitempty"`
}

// PlainFile is a file with plain-text content and the given permissions (644 style).
func PlainFile(path string, permissions int32, content string) File {
	return File{Path: path, Permissions: &permissions, Content: FileContent{Inline: &FileContentInline{Data: content}}}
}

// SetFile adds f, replacing any file with the same path in place, so that plugins can override what a template
// produced without reordering the output.
func (c *NodeConfig) SetFile(f File) {
	for i := range c.Files {
		if c.Files[i].Path == f.Path {
			c.Files[i] = f
			return
		}
	}
	c.Files = append(c.Files, f)
}

// File returns the file at path, or nil.
func (c *NodeConfig) File(path string) *File {
	for i := range c.Files {
		if c.Files[i].Path == path {
			return &c.Files[i]
		}
	}
	return nil
}

// RemoveFile drops the file at path, if any.
func (c *NodeConfig) RemoveFile(path string) {
	out := c.Files[:0]
	for _, f := range c.Files {
		if f.Path != path {
			out = append(out, f)
		}
	}
	c.Files = out
}

// SetUnit adds u, replacing any unit with the same name in place.
func (c *NodeConfig) SetUnit(u Unit) {
	for i := range c.Units {
		if c.Units[i].Name == u.Name {
			c.Units[i] = u
			return
		}
	}
	c.Units = append(c.Units, u)
}

// Unit returns the unit with the name, or nil.
func (c *NodeConfig) Unit(name string) *Unit {
	for i := range c.Units {
		if c.Units[i].Name == name {
			return &c.Units[i]
		}
	}
	return nil
}

// EnsureModules returns the modules, creating them if needed.
func (c *NodeConfig) EnsureModules() *Modules {
	if c.Modules == nil {
		c.Modules = &Modules{}
	}
	return c.Modules
}

// SortedKeys returns the keys of m in order. Plugins must produce deterministic output, and Go randomizes map
// iteration; use this wherever output is built from a map.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
