package cloudinit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"k8s.io/utils/ptr"

	"github.com/osmhq/osm/host/encode/cloudinit"
	"github.com/osmhq/osm/host/encode/cloudinit/cloudinittest"
)

// trickyStrings are values whose YAML style matters: words YAML 1.1 reads as booleans, numbers and
// timestamps, indicators, leading and trailing spaces and line breaks, control characters, the characters
// PyYAML takes for line breaks, and text that is not UTF-8.
var trickyStrings = []string{
	"", "plain", "/etc/path.conf", "yes", "No", "on", "OFF", "y", "n", "true", "null", "~", "0644", "0x1F", "1e3",
	".5", "1_000", "1:30", "2001-12-14", ".inf", "-", "- item", "key: value", "a #comment", "#!/bin/bash", "&anchor",
	"*alias", "!tag", "%directive", "@at", "`tick", "|", ">", "'single'", `"double"`, "{flow: map}", "[flow, seq]",
	" leading space", "trailing space ", "\ttab first", "tab\tinside", "line\n", "two\nlines", "no newline\nat end",
	"kept\n\n", "kept\n\n\n", "\nleading newline", "  \n  indented\n", "a\n  \nb\n", "crlf\r\nline\r\n",
	"bell\a", "nul\x00byte", "del\x7f", "nel\u0085here", "ls\u2028ps\u2029", "bom\ufeff", "emoji 🙂\nline two\n",
	"non-UTF-8 \xff\xfe", "---\n...\n", "  - not: a list\n'quoted' \"double\" # not a comment\n",
	"<MACHINE_NAME>", "__OSM_TOKEN_0__", "systemctl enable --now a.service", "a  b", "x=1,y=2", "user@host", "H4sI+/w==",
	"yes ", "a:b", "a,", "Yes", "e5", "NaN", "Infinity", "a [b]", "a {b}", "a & b", "a | b", "a > b", "all:\n\techo tab-indented\n", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
}

func trickyDocument() *cloudinit.Document {
	doc := &cloudinit.Document{
		Hostname:          "<MACHINE_NAME>",
		PackageUpgrade:    true,
		SSHPwauth:         ptr.To(false),
		SSHAuthorizedKeys: trickyStrings,
		RHSubscription:    map[string]any{"auto-attach": true, "add-pool": []string{"pool1", "yes"}, "username": "0644", "1:30": "key"},
		YumRepoDir:        "/etc/yum.repos.d",
		YumRepos:          map[string]map[string]any{"kubernetes": {"enabled": true, "baseurl": "https://x/rpm/"}, "on": {"name": "- x"}, strings.Repeat("k", 1100): {"name": "long key"}},
		BootCMD:           trickyStrings,
		RunCMD:            []string{"systemctl daemon-reload"},
		CoreOS: &cloudinit.CoreOS{Units: []cloudinit.CoreOSUnit{
			{Name: "a.service", Enable: true, Command: "start", Content: "[Unit]\nX=1\n", DropIns: []cloudinit.CoreOSDropIn{{Name: "10.conf", Content: "two\nlines"}}},
			{Name: "yes", Mask: true},
		}},
	}
	for i, s := range trickyStrings {
		doc.WriteFiles = append(doc.WriteFiles, cloudinit.WriteFile{Path: s, Permissions: "0644", Content: trickyStrings[len(trickyStrings)-1-i]})
	}
	return doc
}

// TestMarshalReadsBackInGo parses the document back with go.yaml.in/yaml/v3, the reader of OSM's tests and
// tools.
func TestMarshalReadsBackInGo(t *testing.T) {
	doc := trickyDocument()
	data, err := cloudinit.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var got cloudinit.Document
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if diff := cmp.Diff(generic(t, doc), generic(t, &got)); diff != "" {
		t.Errorf("read back (-want +got):\n%s\n%s", diff, data)
	}
}

// TestMarshalReadsBackInPyYAML parses the document back with the PyYAML that cloud-init itself runs on (the
// interpreter of the installed cloud-init), the reader that matters on the node.
func TestMarshalReadsBackInPyYAML(t *testing.T) {
	doc := trickyDocument()
	for i := range doc.WriteFiles { // PyYAML reads !!binary as bytes, which JSON cannot carry; the Go test covers it
		if strings.Contains(doc.WriteFiles[i].Content, "\xff") {
			doc.WriteFiles[i].Content = "valid"
		}
		if strings.Contains(doc.WriteFiles[i].Path, "\xff") {
			doc.WriteFiles[i].Path = "valid"
		}
	}
	doc.SSHAuthorizedKeys, doc.BootCMD = utf8Only(doc.SSHAuthorizedKeys), utf8Only(doc.BootCMD)
	data, err := cloudinit.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cloudInitPython(t), "-c",
		"import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1], encoding='utf-8'))))", path).CombinedOutput()
	if err != nil {
		t.Fatalf("PyYAML: %v\n%s\n%s", err, out, data)
	}
	var got any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(generic(t, doc), got); diff != "" {
		t.Errorf("PyYAML read back (-want +got):\n%s\n%s", diff, data)
	}
}

func utf8Only(in []string) []string {
	var out []string
	for _, s := range in {
		if !strings.Contains(s, "\xff") {
			out = append(out, s)
		}
	}
	return out
}

// cloudInitPython is the interpreter named on the first line of the cloud-init script.
func cloudInitPython(t *testing.T) string {
	script, err := os.ReadFile(cloudinittest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := bytes.Cut(script, []byte("\n"))
	py, ok := bytes.CutPrefix(first, []byte("#!"))
	if !ok {
		t.Fatalf("cloud-init is not a script: %q", first)
	}
	return strings.TrimSpace(string(py))
}

// generic is the document as the JSON values both readers produce: struct fields named by their yaml tags,
// empty ones omitted where the tag says omitempty. It is written out here rather than taken from the general
// YAML library, which does not read all of these strings back itself.
func generic(t *testing.T, doc *cloudinit.Document) any {
	t.Helper()
	v, _ := genericValue(reflect.ValueOf(doc))
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// genericValue converts v; ok is false for a value omitempty leaves out.
func genericValue(v reflect.Value) (out any, ok bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, false
		}
		e, _ := genericValue(v.Elem())
		return e, true // a set pointer is written even when it points to a zero value
	case reflect.Struct:
		m := map[string]any{}
		for i := range v.NumField() {
			name, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
			fv, ok := genericValue(v.Field(i))
			if ok || opts != "omitempty" {
				m[name] = fv
			}
		}
		return m, true
	case reflect.Slice:
		l := []any{}
		for i := range v.Len() {
			e, _ := genericValue(v.Index(i))
			l = append(l, e)
		}
		return l, v.Len() > 0
	case reflect.Map:
		m := map[string]any{}
		for _, k := range v.MapKeys() {
			e, _ := genericValue(v.MapIndex(k))
			m[k.String()] = e
		}
		return m, v.Len() > 0
	case reflect.String:
		return v.String(), v.String() != ""
	case reflect.Bool:
		return v.Bool(), v.Bool()
	}
	panic(fmt.Sprintf("unexpected kind %s", v.Kind()))
}

// FuzzMarshalReadsBack holds the emitter to reading back as the same strings for any input.
func FuzzMarshalReadsBack(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s, s+"\n")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		doc := &cloudinit.Document{
			Hostname:   a,
			WriteFiles: []cloudinit.WriteFile{{Path: a, Permissions: "0600", Content: b}, {Path: b, Permissions: "0644", Content: a}},
			RunCMD:     []string{a, b},
			YumRepos:   map[string]map[string]any{a: {b: a}},
		}
		data, err := cloudinit.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		var got cloudinit.Document
		if err := yaml.Unmarshal(data, &got); err != nil {
			t.Fatalf("%v\n%q", err, data)
		}
		if diff := cmp.Diff(generic(t, doc), generic(t, &got)); diff != "" {
			t.Errorf("read back (-want +got):\n%s\n%q", diff, data)
		}
	})
}

// BenchmarkMarshal compares the emitter with the general YAML library on the default Ubuntu profile's
// provisioning document (the golden user-data of plugins/testdata), the document every node gets.
func BenchmarkMarshal(b *testing.B) {
	data, err := os.ReadFile("../../../plugins/testdata/golden/osp-ubuntu_aws_provisioning.userdata")
	if err != nil {
		b.Fatal(err)
	}
	var doc cloudinit.Document
	if err := yaml.Unmarshal(data, &doc); err != nil {
		b.Fatal(err)
	}
	b.Run("emitter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cloudinit.Marshal(&doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("yaml.v3", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf bytes.Buffer
			enc := yaml.NewEncoder(&buf)
			enc.SetIndent(2)
			if err := enc.Encode(&doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
