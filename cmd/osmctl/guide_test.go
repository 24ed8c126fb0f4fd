package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The plugin author guide (sdk/README.md) marks the blocks this test acts on with an HTML comment on the line
// before the block, invisible when the guide is rendered:
//
//	<!-- guide: run -->          a sh block: run every command, in order; a command ending in
//	                             "# exits N" must exit with N, every other one with 0
//	<!-- guide: file NAME -->    write the block to NAME in the current directory
//	<!-- guide: output -->       the output of the previous osmctl command, digests abbreviated
//
// Every sh block of the guide must be marked run, so a command cannot be added without being tested.
const guidePath = "../../sdk/README.md"

// guideRegistry is the registry the guide's commands name; the test substitutes its own.
const guideRegistry = "registry.example.com"

var (
	guideMarker  = regexp.MustCompile(`^<!-- guide: (run|file|output)(?: (\S+))? -->$`)
	expectedExit = regexp.MustCompile(`\s+#\s*exits (\d+)\b.*$`)
	fullDigest   = regexp.MustCompile(`sha256:[0-9a-f]{64}`)
)

type guideBlock struct {
	kind, arg string
	line      int
	body      string
}

// parseGuide returns the marked blocks of a guide, and its problems: unmarked shell blocks, markers without
// a block.
func parseGuide(guide string) (blocks []guideBlock, problems []string) {
	var (
		pending *guideBlock
		current *guideBlock
		lang    string
		body    strings.Builder
	)
	sc := bufio.NewScanner(strings.NewReader(guide))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case current == nil && lang == "" && strings.HasPrefix(line, "```"):
			lang = strings.TrimPrefix(line, "```")
			if lang == "" {
				lang = "text"
			}
			body.Reset()
			if pending != nil {
				current, pending = pending, nil
				current.line = n
			} else if lang == "sh" || lang == "bash" || lang == "shell" {
				problems = append(problems, fmt.Sprintf("line %d: a shell block without <!-- guide: run -->: every command of the guide must be run by TestAuthorGuide", n))
			}
		case lang != "" && line == "```":
			if current != nil {
				current.body = body.String()
				blocks = append(blocks, *current)
			}
			current, lang = nil, ""
		case lang != "":
			body.WriteString(line + "\n")
		default:
			if m := guideMarker.FindStringSubmatch(line); m != nil {
				pending = &guideBlock{kind: m[1], arg: m[2]}
			} else if pending != nil && strings.TrimSpace(line) != "" {
				problems = append(problems, fmt.Sprintf("line %d: a guide marker must be followed by its block", n))
				pending = nil
			}
		}
	}
	if lang != "" {
		problems = append(problems, "the last block is not closed")
	}
	return blocks, problems
}

// readGuide parses the guide and fails the test on any problem.
func readGuide(t *testing.T) []guideBlock {
	t.Helper()
	data, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks, problems := parseGuide(string(data))
	for _, p := range problems {
		t.Errorf("%s: %s", guidePath, p)
	}
	if len(blocks) == 0 {
		t.Fatalf("%s has no guide blocks", guidePath)
	}
	return blocks
}

func TestParseGuide(t *testing.T) {
	readGuide(t) // the real guide is well formed, even when -short skips walking it

	guide := "intro\n<!-- guide: run -->\n```sh\necho a \\\n  b\n# comment\n\nosmctl x  # exits 1\n```\n" +
		"<!-- guide: file x.yaml -->\n```yaml\nk: v\n```\n```sh\nrm -rf /\n```\n<!-- guide: output -->\ntext\n"
	blocks, problems := parseGuide(guide)
	if len(blocks) != 2 || blocks[0].kind != "run" || blocks[1].kind != "file" || blocks[1].arg != "x.yaml" || blocks[1].body != "k: v\n" {
		t.Errorf("blocks = %+v", blocks)
	}
	if got := commands(blocks[0].body); !slices.Equal(got, []string{"echo a    b", "osmctl x  # exits 1"}) {
		t.Errorf("commands = %q", got)
	}
	if len(problems) != 2 || !strings.Contains(problems[0], "line 14: a shell block without") || !strings.Contains(problems[1], "line 18: a guide marker") {
		t.Errorf("problems = %q", problems)
	}
	words, err := shellWords(`plugin run "a b" 'c"d' e`)
	if err != nil || !slices.Equal(words, []string{"plugin", "run", "a b", `c"d`, "e"}) {
		t.Errorf("shellWords = %q, %v", words, err)
	}
}

// guideWalk is the state of a walk through the guide: a shell's current directory, the registry, and what
// earlier commands printed.
type guideWalk struct {
	t        *testing.T
	dir      string
	reg      *testRegistry
	cacheDir string
	pinned   string // the reference osmctl plugin push printed
	last     string // stdout of the last osmctl command
}

// TestAuthorGuide follows sdk/README.md from copying the template plugin to rendering a MachineDeployment
// with the published plugin, against an in-process registry.
func TestAuthorGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a copy of the template plugin")
	}
	blocks := readGuide(t)
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.Symlink(repo, filepath.Join(work, "osm")); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chdir(wd) })

	w := &guideWalk{t: t, dir: work, reg: newRegistry(t, nil), cacheDir: newCacheDir(t)}
	ran := map[string]bool{}
	for _, b := range blocks {
		switch b.kind {
		case "run":
			for _, cmd := range commands(b.body) {
				w.run(b.line, cmd)
				ran[strings.Join(strings.Fields(cmd)[:min(3, len(strings.Fields(cmd)))], " ")] = true
			}
		case "file":
			w.writeFile(b)
		case "output":
			w.checkOutput(b)
		}
	}
	for _, want := range []string{"go test ./...", "osmctl plugin inspect", "osmctl plugin run", "osmctl plugin push", "osmctl lint -f", "osmctl render -f", "osmctl diff -f"} {
		if !ran[want] {
			t.Errorf("the guide no longer runs %q", want)
		}
	}
	if w.pinned == "" {
		t.Error("the guide never published the plugin")
	}
}

// commands splits a sh block into commands, joining continued lines and dropping comments and blank lines.
func commands(block string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(block, "\n") {
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		cmd := strings.TrimSpace(cur.String())
		cur.Reset()
		if cmd != "" && !strings.HasPrefix(cmd, "#") {
			out = append(out, cmd)
		}
	}
	return out
}

func (w *guideWalk) run(line int, cmd string) {
	t := w.t
	t.Helper()
	want := 0
	if m := expectedExit.FindStringSubmatch(cmd); m != nil {
		want, _ = strconv.Atoi(m[1])
		cmd = strings.TrimSpace(expectedExit.ReplaceAllString(cmd, ""))
	}
	cmd = strings.ReplaceAll(cmd, guideRegistry, w.reg.host)
	t.Logf("%s:%d: $ %s", guidePath, line, cmd)
	switch {
	case strings.HasPrefix(cmd, "cd "):
		w.dir = filepath.Join(w.dir, strings.TrimSpace(strings.TrimPrefix(cmd, "cd ")))
	case strings.HasPrefix(cmd, "osmctl "):
		args, err := shellWords(strings.TrimPrefix(cmd, "osmctl "))
		if err != nil {
			t.Fatalf("%s:%d: %v", guidePath, line, err)
		}
		// The test registry speaks plain HTTP; a real one would not need these.
		switch args[0] {
		case "plugin":
			args = append(args, "--plain-http")
		case "render", "lint", "diff":
			args = append(args, "--plugin-registry-plain-http")
		}
		if err := os.Chdir(w.dir); err != nil {
			t.Fatal(err)
		}
		r := osmctl(t, append([]string{"--cache-dir", w.cacheDir}, args...)...)
		if r.code != want {
			t.Fatalf("%s:%d: %s: exit %d, want %d\n%s", guidePath, line, cmd, r.code, want, r)
		}
		w.last = r.stdout
		if args[0] == "plugin" && args[1] == "push" {
			w.pinned = pinnedRef(t, r.stdout)
		}
	default:
		c := exec.Command("sh", "-c", cmd)
		c.Dir = w.dir
		out, err := c.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Fatalf("%s:%d: %s: exit %d, want %d\n%s", guidePath, line, cmd, code, want, out)
		}
	}
}

// writeFile writes a block, with the reference the guide tells the reader to paste and the test registry.
func (w *guideWalk) writeFile(b guideBlock) {
	t := w.t
	t.Helper()
	content := b.body
	if placeholder := "@sha256:<digest>"; strings.Contains(content, placeholder) {
		if w.pinned == "" {
			t.Fatalf("%s:%d: %s needs the pushed reference, but nothing was pushed yet", guidePath, b.line, b.arg)
		}
		repo, _, _ := strings.Cut(w.pinned, "@")
		content = strings.ReplaceAll(content, strings.Replace(repo, w.reg.host, guideRegistry, 1)+placeholder, w.pinned)
		if strings.Contains(content, placeholder) {
			t.Fatalf("%s:%d: %s pastes a reference other than the pushed one", guidePath, b.line, b.arg)
		}
	}
	content = strings.ReplaceAll(content, guideRegistry, w.reg.host)
	if err := os.WriteFile(filepath.Join(w.dir, b.arg), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkOutput compares a sample output with what the previous osmctl command printed, digests abbreviated the
// way the guide writes them.
func (w *guideWalk) checkOutput(b guideBlock) {
	t := w.t
	t.Helper()
	got := strings.ReplaceAll(w.last, w.reg.host, guideRegistry)
	abbreviated := regexp.MustCompile(`sha256:[0-9a-f]{4}…`)
	sample := abbreviated.FindString(b.body)
	if sample == "" {
		sample = "sha256:…"
	}
	got = fullDigest.ReplaceAllString(got, sample)
	if got != b.body {
		t.Errorf("%s:%d: the sample output is stale.\nguide:\n%s\nosmctl:\n%s", guidePath, b.line, b.body, got)
	}
}

// shellWords splits a command line like sh does for the simple cases the guide uses: blanks separate words,
// single and double quotes group them.
func shellWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote in " + s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
