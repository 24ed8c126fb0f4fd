package plugintest

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osmhq/osm/sdk/abi"
)

// Format writes a render response as text meant for review: one section per file, unit and drop-in, with
// the content as it lands on the node (scripts read as scripts), then the modules, SSH keys and warnings. It
// is the format of <case>.response.txt golden files and of Golden.
func Format(resp *abi.RenderResponse) string {
	var b strings.Builder
	cfg := &resp.Config
	for _, f := range cfg.Files {
		mode := "mode default"
		if m, err := f.Mode(); err != nil {
			mode = "mode INVALID " + err.Error()
		} else if f.Permissions != nil {
			mode = fmt.Sprintf("mode %#04o", uint32(m))
		}
		head := "=== file " + f.Path + " (" + mode
		var data string
		if f.Content.Inline != nil {
			data = f.Content.Inline.Data
			if e := f.Content.Inline.Encoding; e != "" {
				head += ", travels as " + e
			}
		}
		section(&b, head+")", data)
	}
	for _, u := range cfg.Units {
		var flags []string
		if u.Enable != nil {
			flags = append(flags, fmt.Sprintf("enable=%t", *u.Enable))
		}
		if u.Mask != nil {
			flags = append(flags, fmt.Sprintf("mask=%t", *u.Mask))
		}
		content := ""
		if u.Content != nil {
			content = *u.Content
		}
		section(&b, strings.TrimSpace("=== unit "+u.Name+" "+strings.Join(flags, " ")), content)
		for _, d := range u.DropIns {
			section(&b, "=== drop-in "+u.Name+".d/"+d.Name, d.Content)
		}
	}
	if cfg.Modules != nil {
		m, _ := json.MarshalIndent(cfg.Modules, "", "  ")
		section(&b, "=== modules", string(m)+"\n")
	}
	if len(cfg.UserSSHKeys) > 0 {
		section(&b, "=== ssh keys", strings.Join(cfg.UserSSHKeys, "\n")+"\n")
	}
	if len(resp.Warnings) > 0 {
		section(&b, "=== warnings", strings.Join(resp.Warnings, "\n")+"\n")
	}
	return b.String()
}

func section(b *strings.Builder, head, content string) {
	b.WriteString(head + "\n")
	b.WriteString(content)
	if content != "" && !strings.HasSuffix(content, "\n") {
		b.WriteString("\n=== (no newline at end of the content above)\n")
	}
}

// Golden compares got with the golden file at path, or writes it when the test runs with -update. The diff
// names the lines that changed.
func Golden(t testing.TB, path, got string) {
	t.Helper()
	if updating() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")); diff != "" {
		t.Errorf("%s differs (-want +got; rerun with -update to accept):\n%s", path, diff)
	}
}
