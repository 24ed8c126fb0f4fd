package validation

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Unit names, drop-in names and file paths of a profile end up in shell commands (systemctl enable in runcmd)
// and in paths on the node, so they are held to what systemd and a file system need, and nothing that a shell
// or a path would read as more: no spaces, separators, quotes, control characters, "..", or leading dashes
// that a command would take for an option.

// unitSuffixes are the unit types systemd knows (systemd.unit(5)).
var unitSuffixes = []string{"service", "socket", "device", "mount", "automount", "swap", "target", "path", "timer", "slice", "scope"}

var (
	// A unit name: systemd's characters (letters, digits, ":-_.\@") with backslash only in \xNN escapes (as
	// systemd-escape writes them), an optional @instance, and a type suffix.
	unitNamePattern = regexp.MustCompile(`^(?:[A-Za-z0-9:_.@-]|\\x[0-9a-fA-F]{2})+\.(?:` + strings.Join(unitSuffixes, "|") + `)$`)
	dropInPattern   = regexp.MustCompile(`^[A-Za-z0-9:_.@-]+\.conf$`)
	pathPattern     = regexp.MustCompile(`^/[A-Za-z0-9._/+@:=,~-]*$`)
)

const maxNameLength = 255 // systemd's and most file systems' limit on a file name

func unitNameProblem(name string) string {
	switch {
	case !unitNamePattern.MatchString(name):
		return fmt.Sprintf("must be a systemd unit name: letters, digits and \":-_.@\" (backslash only in \\xNN escapes), ending in .%s",
			strings.Join(unitSuffixes, ", ."))
	case len(name) > maxNameLength:
		return fmt.Sprintf("must be at most %d characters", maxNameLength)
	case strings.HasPrefix(name, "-") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "@"):
		return "must not start with '-', '.' or '@'"
	case strings.Contains(name, ".."):
		return "must not contain '..'"
	case strings.Count(name, "@") > 1:
		return "must contain at most one '@' (template@instance.type)"
	}
	return ""
}

func dropInNameProblem(name string) string {
	switch {
	case !dropInPattern.MatchString(name):
		return "must be a file name of letters, digits and \":-_.@\" ending in .conf"
	case len(name) > maxNameLength:
		return fmt.Sprintf("must be at most %d characters", maxNameLength)
	case strings.HasPrefix(name, "-") || strings.HasPrefix(name, "."):
		return "must not start with '-' or '.'"
	case strings.Contains(name, ".."):
		return "must not contain '..'"
	}
	return ""
}

// maxPathLength is Linux's PATH_MAX.
const maxPathLength = 4096

func pathProblem(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "must be an absolute path"
	case path.Clean(p) != p || p == "/":
		return "must be a clean path of a file (no trailing slash, '.', '..' or '//')"
	case strings.Contains(p, ".."):
		return "must not contain '..'"
	case !pathPattern.MatchString(p):
		return "must consist of letters, digits and \"._/+@:=,~-\" (no spaces, quotes, shell characters or control characters)"
	case len(p) > maxPathLength:
		return fmt.Sprintf("must be at most %d characters", maxPathLength)
	}
	return ""
}
