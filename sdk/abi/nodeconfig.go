package abi

import (
	"fmt"
	"io/fs"
	"sort"
	"strconv"
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
	// Permissions are the mode bits in the wire format of upstream OSM: decimal digits read as octal, so the
	// JSON 644 means mode 0644. Go code should not set it by hand: PlainFile and WireMode take Go octal
	// (0o644) and convert, and Mode converts back.
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

// PlainFile is a file with plain-text content and the given mode, written as a Go octal literal the way
// os.WriteFile takes it: 0o644 (or 0644) is rw-r--r--. The wire format (decimal digits read as octal, see
// File.Permissions) is produced here, so a Go developer never writes it.
//
// PlainFile panics on a mode that is not plain permission bits (anything outside 0o6777, or the sticky bit),
// and on the four modes that are the decimal numbers 400, 440, 444 and 500 (0o620, 0o670, 0o674, 0o764): both
// are what the decimal spelling of the old API (PlainFile(p, 644, …)) gives, and a mode the caller did not
// mean must stop the first render rather than reach a node. The SDK's guest package turns the panic into the
// render's error ("plugin panicked: abi.PlainFile(…)"), so the mistake shows on the first native test.
func PlainFile(path string, mode fs.FileMode, content string) File {
	wire, err := WireMode(mode)
	if err != nil {
		panic(fmt.Sprintf("abi.PlainFile(%q): %v", path, err))
	}
	return File{Path: path, Permissions: &wire, Content: FileContent{Inline: &FileContentInline{Data: content}}}
}

// decimalLookalikes are Go modes equal to a decimal number made of octal digits that is itself a common mode
// (400 == 0o620, 440 == 0o670, 444 == 0o674, 500 == 0o764): someone writing PlainFile(p, 400, …) meant 0o400.
var decimalLookalikes = map[fs.FileMode]string{0o620: "400", 0o670: "440", 0o674: "444", 0o764: "500"}

// WireMode converts a Go file mode (0o644) to the wire format of File.Permissions (644). It accepts the
// permission bits and setuid/setgid (0o6777) and refuses everything else with a message, notably a mode
// written in decimal (644 is 0o1204, which has the sticky bit).
func WireMode(mode fs.FileMode) (int32, error) {
	if d, ok := decimalLookalikes[mode]; ok {
		return 0, fmt.Errorf("mode %d is the decimal %s read as Go octal (%#o); write modes as Go octal literals, e.g. 0o%s", mode, d, uint32(mode), d)
	}
	if mode&^0o6777 != 0 || mode > 0o7777 {
		hint := ""
		if s := strconv.FormatUint(uint64(mode), 10); isOctalDigits(s) && mode <= 7777 {
			hint = fmt.Sprintf("; to get rw-style mode %s write 0o%s", s, s)
		}
		return 0, fmt.Errorf("mode %d (%#o) is not a file permission: write modes as Go octal literals, e.g. 0o644%s", mode, uint32(mode), hint)
	}
	n, err := strconv.ParseInt(strconv.FormatUint(uint64(mode), 8), 10, 32)
	if err != nil {
		return 0, err
	}
	return int32(n), nil
}

// Mode returns the file's permissions as a Go file mode (wire 644 is 0o644), and an error when the wire value
// is not decimal digits read as octal (a digit 8 or 9, more than four digits, or negative). A file without
// permissions has mode 0 and no error: the encoders then use the provisioning utility's default (0644).
func (f *File) Mode() (fs.FileMode, error) {
	if f.Permissions == nil {
		return 0, nil
	}
	s := strconv.FormatInt(int64(*f.Permissions), 10)
	if *f.Permissions < 0 || len(s) > 4 || !isOctalDigits(s) {
		return 0, fmt.Errorf("file %s: permissions %d are not octal digits (wire format: 644 means 0644)", f.Path, *f.Permissions)
	}
	m, _ := strconv.ParseUint(s, 8, 32)
	return fs.FileMode(m), nil
}

func isOctalDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '7' {
			return false
		}
	}
	return s != ""
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
