package plugintest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/abi"
)

// Sandbox runs a generated node script on the test machine without touching it, so that a script that fails
// on a node (a hook reading a file that is not there, under `set -euo pipefail`) fails a test first.
//
// What makes it a sandbox, and its limits:
//   - every absolute path in the script except /dev (but /dev/disk), /proc and /sys is rewritten to the same path under Root
//     (RootPath), so /etc/machine-name is Root/etc/machine-name; a path built at run time from pieces is not;
//   - PATH holds the stubs (Stubs) and a directory of links to a fixed list of harmless tools (sed, grep,
//     awk, coreutils: sandboxTools); any other command (systemctl, curl, mount, reboot, zypper, ...) runs
//     bash's command_not_found_handle, which records it in Calls and succeeds with no output;
//   - sleep is such an unknown command, so retry loops do not wait; the run is killed after 30 seconds.
//
// The sandbox is for tests of generated text; it is not a security boundary for hostile scripts.
type Sandbox struct {
	// Root is the directory that stands for the node's /.
	Root string
	// Stubs are commands the script may call, name to bash body (arguments in "$@"), e.g.
	// "hostname": `echo node-1.example`.
	Stubs map[string]string
	// Files are files to create under Root before the run, node path to content.
	Files map[string]string
	// Dirs are directories to create under Root before the run: ImageDirs unless changed.
	Dirs []string
}

// ImageDirs are the directories a new sandbox has, those the images the kit supports ship and its scripts
// write into without creating them: openSUSE's file system labelled "ignition" (as a directory: mount is a
// stub), systemd's unit directory, cloud-init's configuration directory, /boot (with Flatcar's /boot/flatcar)
// and Flatcar's OEM directory (before 2023: /usr/share/oem).
var ImageDirs = []string{"/dev/disk/by-label/ignition", "/etc/systemd/system", "/etc/cloud/cloud.cfg.d", "/boot", "/boot/flatcar", "/usr/share/oem", "/run", "/var/lib", "/tmp"}

// SandboxRun is the outcome of Sandbox.Run.
type SandboxRun struct {
	// Err is the script's exit error, nil when it exited 0.
	Err error
	// Output is its standard output and standard error.
	Output string
	// Calls are the stubbed and unknown commands it ran, one "name args..." line each, in order, with node
	// paths (the sandbox's root cut off).
	Calls []string
}

// sandboxTools are the real tools a sandboxed script may run: they read and write only the paths they are
// given, which the sandbox rewrote.
var sandboxTools = []string{"awk", "base64", "basename", "bash", "cat", "chmod", "cmp", "cp", "cut", "dirname",
	"echo", "env", "false", "grep", "gzip", "head", "install", "ln", "ls", "mkdir", "mktemp", "mv", "printf",
	"readlink", "rm", "sed", "seq", "sh", "sha256sum", "sort", "stat", "tail", "tar", "tee", "test", "touch", "tr",
	"true", "uname", "wc", "xargs"}

// NewSandbox returns a sandbox rooted in a new temporary directory of the test.
func NewSandbox(t testing.TB) *Sandbox {
	t.Helper()
	return &Sandbox{Root: t.TempDir(), Stubs: map[string]string{}, Files: map[string]string{}, Dirs: append([]string(nil), ImageDirs...)}
}

// AddConfig adds the files and units of cfg to Files, with the placeholders replaced by SampleSecrets, the way a
// provisioning utility writes them before the scripts run.
func (sb *Sandbox) AddConfig(cfg *abi.NodeConfig) {
	final := substitute(cfg, SampleSecrets)
	for _, f := range final.Files {
		if f.Content.Inline != nil {
			sb.Files[f.Path] = f.Content.Inline.Data
		}
	}
	for _, u := range final.Units {
		if u.Content != nil && *u.Content != "" {
			sb.Files["/etc/systemd/system/"+u.Name] = *u.Content
		}
		for _, d := range u.DropIns {
			sb.Files["/etc/systemd/system/"+u.Name+".d/"+d.Name] = d.Content
		}
	}
}

// RootPath is where node path p lives in the sandbox.
func (sb *Sandbox) RootPath(p string) string { return filepath.Join(sb.Root, p) }

// ReadFile returns the content of node path p in the sandbox, or "" when there is none.
func (sb *Sandbox) ReadFile(p string) string {
	b, _ := os.ReadFile(sb.RootPath(p))
	return string(b)
}

// Exists reports whether node path p exists in the sandbox.
func (sb *Sandbox) Exists(p string) bool {
	_, err := os.Lstat(sb.RootPath(p))
	return err == nil
}

// Run writes the script into the sandbox (rewritten, see Sandbox) and runs it with bash.
func (sb *Sandbox) Run(t testing.TB, script string) SandboxRun {
	t.Helper()
	bin, stubs := filepath.Join(sb.Root, ".osm-test", "bin"), filepath.Join(sb.Root, ".osm-test", "stubs")
	for _, d := range []string{bin, stubs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range sandboxTools {
		if p, err := exec.LookPath(tool); err == nil {
			_ = os.Symlink(p, filepath.Join(bin, tool))
		}
	}
	calls := filepath.Join(sb.Root, ".osm-test", "calls")
	for name, body := range sb.Stubs {
		record := "printf '%s\\n' \"" + name + " $*\" >>" + shellQuote(calls) + "\n"
		write(t, filepath.Join(stubs, name), "#!"+filepath.Join(bin, "bash")+"\n"+record+body+"\n", 0o755)
	}
	for _, d := range sb.Dirs {
		if err := os.MkdirAll(sb.RootPath(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range sb.Files {
		write(t, sb.RootPath(p), content, 0o644)
	}
	env := filepath.Join(sb.Root, ".osm-test", "env.sh")
	write(t, env, "command_not_found_handle() { printf '%s\\n' \"$*\" >>"+shellQuote(calls)+"; return 0; }\n", 0o644)
	path := filepath.Join(sb.Root, ".osm-test", "script")
	write(t, path, RewritePaths(script, sb.Root), 0o755)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "bash"), path)
	cmd.Dir = sb.Root
	cmd.Env = []string{"PATH=" + stubs + ":" + bin, "BASH_ENV=" + env, "HOME=" + sb.Root, "LC_ALL=C", "TMPDIR=" + sb.RootPath("/tmp")}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after 30s: %w", err)
	}
	run := SandboxRun{Err: err, Output: string(out)}
	if b, rerr := os.ReadFile(calls); rerr == nil {
		// Calls name node paths, as the script does.
		run.Calls = strings.Split(strings.TrimSuffix(strings.ReplaceAll(string(b), sb.Root, ""), "\n"), "\n")
	}
	return run
}

// Called reports whether a recorded call starts with prefix (e.g. "systemctl --no-block reboot").
func (r SandboxRun) Called(prefix string) bool {
	for _, c := range r.Calls {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

func write(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// RewritePaths puts every absolute path of script under root, except those under /dev (but /dev/disk, the
// links to file systems by label, is rewritten), /proc and /sys. A path
// starts at a '/' followed by a letter where the character before is none of those that continue a word, a
// URL or a sed expression (letters, digits, "_.-$}~:/]*").
func RewritePaths(script, root string) string {
	var b strings.Builder
	for i := 0; i < len(script); i++ {
		c := script[i]
		if c == '/' && i+1 < len(script) && isLetter(script[i+1]) && (i == 0 || !strings.ContainsRune("_.-$}~:/]*", rune(script[i-1])) && !isLetter(script[i-1]) && !isDigit(script[i-1])) {
			rest := script[i:]
			if strings.HasPrefix(rest, "/dev/disk/") || !strings.HasPrefix(rest, "/dev/") && !strings.HasPrefix(rest, "/proc/") && !strings.HasPrefix(rest, "/sys/") {
				b.WriteString(root)
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
