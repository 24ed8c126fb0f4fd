package node

import (
	"strconv"

	"github.com/osmhq/osm/sdk/abi"
	json "github.com/osmhq/osm/sdk/internal/wirejson"
)

// jsonWriter writes the JSON files of a node's configuration (the kubelet's config and bootstrap kubeconfig)
// as encoding/json's Encoder writes them with SetIndent("", "  ") and SetEscapeHTML(false), field by field.
// In the sandbox encoding/json's reflection and its byte-by-byte indent pass cost a host round trip per
// byte (wazero's check, at every loop iteration, of whether the call has ended): a third of the provisioning
// render's time.
// TestConfigFilesMatchEncodingJSON holds the two to the same output.
type jsonWriter struct {
	b []byte
	// members counts what each open object or array has written so far.
	members []int
}

func (w *jsonWriter) open(c byte) {
	w.b = append(w.b, c)
	w.members = append(w.members, 0)
}

func (w *jsonWriter) close(c byte) {
	n := w.members[len(w.members)-1]
	w.members = w.members[:len(w.members)-1]
	if n > 0 {
		w.newline()
	}
	w.b = append(w.b, c)
}

// next starts the next member of the innermost object or array: a comma after the first, then the indent.
func (w *jsonWriter) next() {
	i := len(w.members) - 1
	if w.members[i] > 0 {
		w.b = append(w.b, ',')
	}
	w.members[i]++
	w.newline()
}

func (w *jsonWriter) newline() {
	w.b = append(w.b, '\n')
	for range len(w.members) {
		w.b = append(w.b, ' ', ' ')
	}
}

func (w *jsonWriter) key(k string) {
	w.next()
	w.b = json.AppendText(w.b, k)
	w.b = append(w.b, ':', ' ')
}

func (w *jsonWriter) object(k string) { w.key(k); w.open('{') }
func (w *jsonWriter) end()            { w.close('}') }

func (w *jsonWriter) str(k, v string) { w.key(k); w.b = json.AppendText(w.b, v) }

func (w *jsonWriter) boolean(k string, v bool) { w.key(k); w.b = strconv.AppendBool(w.b, v) }

func (w *jsonWriter) int(k string, v int64) { w.key(k); w.b = strconv.AppendInt(w.b, v, 10) }

// strOmit and intOmit leave out an empty value, as omitempty does.
func (w *jsonWriter) strOmit(k, v string) {
	if v != "" {
		w.str(k, v)
	}
}

func (w *jsonWriter) intOmit(k string, v *int32) {
	if v != nil {
		w.int(k, int64(*v))
	}
}

// strings writes a list; nil is null, as encoding/json writes a nil slice.
func (w *jsonWriter) strings(k string, v []string) {
	w.key(k)
	if v == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.open('[')
	for _, s := range v {
		w.next()
		w.b = json.AppendText(w.b, s)
	}
	w.close(']')
}

// stringMap writes m with sorted keys; nil is null.
func (w *jsonWriter) stringMap(k string, m map[string]string) { writeMap(w, k, m, w.str) }

func (w *jsonWriter) boolMap(k string, m map[string]bool) { writeMap(w, k, m, w.boolean) }

// writeMap writes m as an object under k, each member through member in key order; nil is null.
func writeMap[V any](w *jsonWriter, k string, m map[string]V, member func(string, V)) {
	w.key(k)
	if m == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.open('{')
	for _, mk := range abi.SortedKeys(m) {
		member(mk, m[mk])
	}
	w.close('}')
}

// String ends the document with the newline encoding/json's Encoder writes.
func (w *jsonWriter) String() string { return string(append(w.b, '\n')) }
