package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/osmhq/osm/sdk/abi"
)

// change is one difference between two renders of a stage.
type change struct {
	// kind is "added", "removed" or "changed".
	kind string
	// object names what changed: "file /etc/x", "unit kubelet.service", "modules.runcmd", ...
	object string
	// notes are attribute changes, "mode 0644 -> 0600".
	notes []string
	// patch is a unified diff of the content, if the content changed.
	patch string
}

// compareStage lists what differs between two renders of a stage: files by path, units by name (drop-ins
// included), the cloud-init modules and the SSH keys, each in a stable order.
func compareStage(from, to *abi.NodeConfig) []change {
	var out []change
	out = append(out, compareFiles(from.Files, to.Files)...)
	out = append(out, compareUnits(from.Units, to.Units)...)
	out = append(out, compareModules(from.Modules, to.Modules)...)
	if p := unifiedDiff("a/userSSHKeys", "b/userSSHKeys", joinLines(from.UserSSHKeys), joinLines(to.UserSSHKeys)); p != "" {
		out = append(out, change{kind: "changed", object: "user SSH keys", patch: p})
	}
	return out
}

// byKey indexes both sides by key and returns every key of either side, sorted.
func byKey[T any](from, to []T, key func(T) string) (old, cur map[string]T, keys []string) {
	old, cur = map[string]T{}, map[string]T{}
	for _, v := range from {
		old[key(v)] = v
		keys = append(keys, key(v))
	}
	for _, v := range to {
		cur[key(v)] = v
		keys = append(keys, key(v))
	}
	slices.Sort(keys)
	return old, cur, slices.Compact(keys)
}

func compareFiles(from, to []abi.File) []change {
	old, cur, paths := byKey(from, to, func(f abi.File) string { return f.Path })
	var out []change
	for _, p := range paths {
		o, inOld := old[p]
		n, inNew := cur[p]
		object := "file " + p
		switch {
		case !inOld:
			c := change{kind: "added", object: object, notes: []string{"mode " + mode(n.Permissions)}}
			c.notes, c.patch = contentChange(c.notes, "/dev/null", "b"+p, "", fileData(n))
			out = append(out, c)
		case !inNew:
			c := change{kind: "removed", object: object}
			c.notes, c.patch = contentChange(c.notes, "a"+p, "/dev/null", fileData(o), "")
			out = append(out, c)
		default:
			c := change{kind: "changed", object: object}
			if mode(o.Permissions) != mode(n.Permissions) {
				c.notes = append(c.notes, fmt.Sprintf("mode %s -> %s", mode(o.Permissions), mode(n.Permissions)))
			}
			if oe, ne := fileEncoding(o), fileEncoding(n); oe != ne {
				c.notes = append(c.notes, fmt.Sprintf("encoding %s -> %s", oe, ne))
			}
			c.notes, c.patch = contentChange(c.notes, "a"+p, "b"+p, fileData(o), fileData(n))
			if len(c.notes) > 0 || c.patch != "" {
				out = append(out, c)
			}
		}
	}
	if c, ok := orderChange("file", filePaths(from), filePaths(to)); ok {
		out = append(out, c)
	}
	return out
}

// orderChange reports when the items both sides have appear in a different order (which changes the
// user-data, though rarely what a node does).
func orderChange(what string, from, to []string) (change, bool) {
	inTo := map[string]bool{}
	for _, s := range to {
		inTo[s] = true
	}
	inFrom := map[string]bool{}
	for _, s := range from {
		inFrom[s] = true
	}
	common := func(list []string, in map[string]bool) []string {
		var out []string
		for _, s := range list {
			if in[s] {
				out = append(out, s)
			}
		}
		return out
	}
	a, b := common(from, inTo), common(to, inFrom)
	if slices.Equal(a, b) {
		return change{}, false
	}
	return change{kind: "changed", object: what + " order", patch: unifiedDiff("a/"+what+"-order", "b/"+what+"-order", joinLines(a), joinLines(b))}, true
}

func filePaths(files []abi.File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Path
	}
	return out
}

func compareUnits(from, to []abi.Unit) []change {
	old, cur, names := byKey(from, to, func(u abi.Unit) string { return u.Name })
	var out []change
	for _, name := range names {
		o, inOld := old[name]
		n, inNew := cur[name]
		object := "unit " + name
		switch {
		case !inOld:
			c := change{kind: "added", object: object, notes: unitFlags(n)}
			c.notes, c.patch = contentChange(c.notes, "/dev/null", "b/units/"+name, "", deref(n.Content))
			out = append(out, c)
			out = append(out, compareDropIns(name, nil, n.DropIns)...)
		case !inNew:
			c := change{kind: "removed", object: object}
			c.notes, c.patch = contentChange(c.notes, "a/units/"+name, "/dev/null", deref(o.Content), "")
			out = append(out, c)
			out = append(out, compareDropIns(name, o.DropIns, nil)...)
		default:
			c := change{kind: "changed", object: object}
			if oe, ne := boolFlag(o.Enable), boolFlag(n.Enable); oe != ne {
				c.notes = append(c.notes, fmt.Sprintf("enable %s -> %s", oe, ne))
			}
			if om, nm := boolFlag(o.Mask), boolFlag(n.Mask); om != nm {
				c.notes = append(c.notes, fmt.Sprintf("mask %s -> %s", om, nm))
			}
			c.notes, c.patch = contentChange(c.notes, "a/units/"+name, "b/units/"+name, deref(o.Content), deref(n.Content))
			if len(c.notes) > 0 || c.patch != "" {
				out = append(out, c)
			}
			out = append(out, compareDropIns(name, o.DropIns, n.DropIns)...)
		}
	}
	return out
}

func compareDropIns(unit string, from, to []abi.DropIn) []change {
	old, cur := map[string]string{}, map[string]string{}
	var names []string
	for _, d := range from {
		old[d.Name] = d.Content
		names = append(names, d.Name)
	}
	for _, d := range to {
		cur[d.Name] = d.Content
		names = append(names, d.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var out []change
	for _, name := range names {
		o, inOld := old[name]
		n, inNew := cur[name]
		label := "units/" + unit + ".d/" + name
		c := change{kind: "changed", object: "unit " + unit + " drop-in " + name}
		switch {
		case !inOld:
			c.kind = "added"
			c.notes, c.patch = contentChange(nil, "/dev/null", "b/"+label, "", n)
		case !inNew:
			c.kind = "removed"
			c.notes, c.patch = contentChange(nil, "a/"+label, "/dev/null", o, "")
		default:
			c.notes, c.patch = contentChange(nil, "a/"+label, "b/"+label, o, n)
			if len(c.notes) == 0 && c.patch == "" {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

func compareModules(from, to *abi.Modules) []change {
	if from == nil {
		from = &abi.Modules{}
	}
	if to == nil {
		to = &abi.Modules{}
	}
	var out []change
	for _, m := range []struct {
		name     string
		old, new string
	}{
		{"bootcmd", joinLines(from.BootCMD), joinLines(to.BootCMD)},
		{"runcmd", joinLines(from.RunCMD), joinLines(to.RunCMD)},
		{"rh_subscription", keyValues(from.RHSubscription), keyValues(to.RHSubscription)},
		{"yum_repos", yumRepos(from.YumRepos), yumRepos(to.YumRepos)},
		{"yum_repo_dir", lineOf(from.YumRepoDir), lineOf(to.YumRepoDir)},
	} {
		label := "modules/" + m.name
		c := change{kind: "changed", object: "modules." + m.name}
		fromLabel, toLabel := "a/"+label, "b/"+label
		switch {
		case m.old == m.new:
			continue
		case m.old == "":
			c.kind, fromLabel = "added", "/dev/null"
		case m.new == "":
			c.kind, toLabel = "removed", "/dev/null"
		}
		c.patch = unifiedDiff(fromLabel, toLabel, m.old, m.new)
		out = append(out, c)
	}
	return out
}

// contentChange diffs text; binary content (not UTF-8, or with NUL bytes) is summarised in a note instead.
func contentChange(notes []string, fromLabel, toLabel, a, b string) ([]string, string) {
	if a == b {
		return notes, ""
	}
	if isBinary(a) || isBinary(b) {
		return append(notes, fmt.Sprintf("binary content %d -> %d bytes", len(a), len(b))), ""
	}
	return notes, unifiedDiff(fromLabel, toLabel, a, b)
}

func isBinary(s string) bool { return !utf8.ValidString(s) || strings.ContainsRune(s, 0) }

func fileData(f abi.File) string {
	if f.Content.Inline == nil {
		return ""
	}
	return f.Content.Inline.Data
}

func fileEncoding(f abi.File) string {
	if f.Content.Inline == nil || f.Content.Inline.Encoding == "" {
		return "plain"
	}
	return f.Content.Inline.Encoding
}

// mode formats permissions (decimal digits read as octal; absent means 644) as 0644.
func mode(p *int32) string {
	if p == nil || *p == 0 {
		return "0644"
	}
	return fmt.Sprintf("%04d", *p)
}

func unitFlags(u abi.Unit) []string {
	var notes []string
	if u.Enable != nil {
		notes = append(notes, "enable "+boolFlag(u.Enable))
	}
	if u.Mask != nil {
		notes = append(notes, "mask "+boolFlag(u.Mask))
	}
	return notes
}

func boolFlag(b *bool) string {
	if b == nil {
		return "unset"
	}
	return strconv.FormatBool(*b)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func joinLines(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

func lineOf(s string) string {
	if s == "" {
		return ""
	}
	return s + "\n"
}

func keyValues(m map[string]string) string {
	var b strings.Builder
	for _, k := range abi.SortedKeys(m) {
		fmt.Fprintf(&b, "%s: %s\n", k, m[k])
	}
	return b.String()
}

func yumRepos(repos map[string]map[string]string) string {
	var b strings.Builder
	for _, name := range abi.SortedKeys(repos) {
		fmt.Fprintf(&b, "[%s]\n", name)
		for _, k := range abi.SortedKeys(repos[name]) {
			fmt.Fprintf(&b, "%s = %s\n", k, repos[name][k])
		}
	}
	return b.String()
}
