package cloudinit

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/osmhq/osm/sdk/abi"
)

// The document is written by this small emitter rather than by a general YAML library: the general one spent
// about 9% of the controller's CPU and a fifth of its allocations on the 1,000 documents of a 500-node start
// (make bench-controller), analysing every character of every script to choose a style. Here the style of a
// string is chosen once, conservatively, for both YAML readers that matter (PyYAML in cloud-init, YAML 1.1;
// go.yaml.in/yaml/v3 in OSM's tests and tools):
//   - plain only for words, paths and commands that no reader resolves to anything but a string;
//   - a literal block for multi-line text that needs no escaping (scripts, units, PEM);
//   - otherwise a double-quoted string, escaping everything outside printable Unicode;
//   - !!binary for a string that is not UTF-8 (as the general library did).
// The tests parse the output back with both readers (yaml_test.go; cloudinittest runs `cloud-init schema`).

// yamlWriter appends a block-style YAML document to buf.
type yamlWriter struct {
	buf []byte
}

// key starts the mapping entry k at indent; the value follows on the same line or in an indented block.
// A key longer than YAML's limit for implicit keys (1024 characters) is written as an explicit one ("? k").
func (w *yamlWriter) key(indent int, k string) {
	w.indent(indent)
	start := len(w.buf)
	w.scalarInline(k)
	if len(w.buf)-start > maxImplicitKey {
		key := append([]byte(nil), w.buf[start:]...)
		w.buf = append(append(append(w.buf[:start], "? "...), key...), '\n')
		w.indent(indent)
	}
	w.buf = append(w.buf, ':')
}

// blockKey starts the entry k at indent whose value is the block that follows on the next lines.
func (w *yamlWriter) blockKey(indent int, k string) {
	w.key(indent, k)
	w.buf = append(w.buf, '\n')
}

// maxImplicitKey is a little under YAML's 1024-character limit on implicit keys, which readers count in
// characters, not bytes.
const maxImplicitKey = 1000

func (w *yamlWriter) indent(n int) {
	for range n {
		w.buf = append(w.buf, ' ')
	}
}

// firstEntry starts an item of a block sequence at indent with the entry "k: v"; the item's other entries
// follow at indent+2.
func (w *yamlWriter) firstEntry(indent int, k, v string) {
	w.indent(indent)
	w.buf = append(w.buf, "- "...)
	w.key(0, k)
	w.buf = append(w.buf, ' ')
	w.str(indent+4, v)
}

// stringEntry writes "k: v" at indent, with v in the style v needs (a literal block indented below k).
func (w *yamlWriter) stringEntry(indent int, k, v string) {
	w.key(indent, k)
	w.buf = append(w.buf, ' ')
	w.str(indent+2, v)
}

// str writes a string value after "key: " or "- ", whose block content (if any) goes at indent.
func (w *yamlWriter) str(indent int, s string) {
	if strings.Contains(s, "\n") && literalSafe(s) {
		w.literal(indent, s)
		return
	}
	w.scalarInline(s)
	w.buf = append(w.buf, '\n')
}

// scalarInline writes s on the current line: plain, double-quoted, or as !!binary.
func (w *yamlWriter) scalarInline(s string) {
	switch {
	case !utf8.ValidString(s):
		w.buf = append(w.buf, "!!binary "...)
		w.buf = strconv.AppendQuote(w.buf, base64.StdEncoding.EncodeToString([]byte(s)))
	case plainSafe(s):
		w.buf = append(w.buf, s...)
	default:
		w.quoted(s)
	}
}

// literal writes s as a literal block scalar; the chomping indicator keeps its trailing newlines exactly.
func (w *yamlWriter) literal(indent int, s string) {
	body := strings.TrimRight(s, "\n")
	switch len(s) - len(body) {
	case 0:
		w.buf = append(w.buf, "|-\n"...)
	case 1:
		w.buf = append(w.buf, "|\n"...)
	default:
		w.buf = append(w.buf, "|+\n"...)
	}
	for line := range strings.SplitSeq(s[:len(s)-min(len(s)-len(body), 1)], "\n") {
		if line != "" {
			w.indent(indent)
			w.buf = append(w.buf, line...)
		}
		w.buf = append(w.buf, '\n')
	}
}

// quoted writes s double-quoted. Printable characters stay as they are; everything a YAML reader could take
// for a line break, a byte order mark or a control character is escaped (\uXXXX is valid YAML too).
func (w *yamlWriter) quoted(s string) {
	w.buf = append(w.buf, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			w.buf = append(w.buf, '\\', byte(r))
		case r == '\n':
			w.buf = append(w.buf, `\n`...)
		case r == '\t':
			w.buf = append(w.buf, `\t`...)
		case needsEscape(r): // all of them are in the Basic Multilingual Plane
			w.buf = fmt.Appendf(w.buf, `\u%04X`, r)
		default:
			w.buf = utf8.AppendRune(w.buf, r)
		}
	}
	w.buf = append(w.buf, '"')
}

// needsEscape reports the runes that must not appear raw in a YAML stream (C0 and C1 controls, DEL, the
// Unicode line and paragraph separators, the byte order mark, non-characters) or that PyYAML treats as line
// breaks.
func needsEscape(r rune) bool {
	return r < 0x20 || (r >= 0x7F && r <= 0x9F) || r == 0x2028 || r == 0x2029 || r == 0xFEFF ||
		r == 0xFFFE || r == 0xFFFF || r == utf8.RuneError
}

// literalSafe reports whether s can be a literal block: no character needing an escape (tabs are fine), and
// a first line that starts with no space, tab or line break, so the block's indentation is detected from
// it. Invalid UTF-8 is never literal.
func literalSafe(s string) bool {
	if s == "" || s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && needsEscape(r) {
			return false
		}
	}
	return true
}

// plainSafe reports whether s can be written plain and read back as the same string by YAML 1.1 and 1.2
// readers: a letter, '/' or '_' first (never an indicator or a digit, so never a number or a timestamp), then
// letters, digits, spaces (none at the end) and "_./-+=,@%" only (no ':' or '#', which could end the scalar),
// and not one of the words YAML 1.1 reads as a boolean or null.
func plainSafe(s string) bool {
	if s == "" || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '/':
		case i > 0 && (c >= '0' && c <= '9' || strings.IndexByte(" .-+=,@%", c) >= 0):
		default:
			return false
		}
	}
	return !slices.Contains(yaml11Words, strings.ToLower(s))
}

// yaml11Words are the plain words YAML 1.1 resolves to booleans or null.
var yaml11Words = []string{"y", "n", "yes", "no", "on", "off", "true", "false", "null"}

// boolEntry writes "k: true" or "k: false".
func (w *yamlWriter) boolEntry(indent int, k string, v bool) {
	w.key(indent, k)
	w.buf = append(w.buf, ' ')
	w.buf = strconv.AppendBool(w.buf, v)
	w.buf = append(w.buf, '\n')
}

// stringList writes "k:" and the strings as a block sequence.
func (w *yamlWriter) stringList(indent int, k string, items []string) {
	w.blockKey(indent, k)
	for _, it := range items {
		w.indent(indent + 2)
		w.buf = append(w.buf, "- "...)
		w.str(indent+4, it)
	}
}

// anyMap writes "k:" and a mapping of the values cloud-init's schema types (strings, booleans, string
// lists), keys sorted.
func (w *yamlWriter) anyMap(indent int, k string, m map[string]any) error {
	w.blockKey(indent, k)
	for _, mk := range abi.SortedKeys(m) {
		switch v := m[mk].(type) {
		case string:
			w.stringEntry(indent+2, mk, v)
		case bool:
			w.boolEntry(indent+2, mk, v)
		case []string:
			w.stringList(indent+2, mk, v)
		default:
			return fmt.Errorf("%s.%s: cannot write a value of type %T", k, mk, v)
		}
	}
	return nil
}
