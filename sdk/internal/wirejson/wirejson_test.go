package wirejson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
)

// abiValues are pointers to every envelope of the ABI; the differential tests fill them at random, so a field
// added to the ABI later is covered without touching these tests.
func abiValues() []any {
	return []any{&abi.RenderRequest{}, &abi.RenderResponse{}, &abi.ValidateRequest{}, &abi.ValidateResponse{},
		&abi.EncodeRequest{}, &abi.EncodeResponse{}, &abi.Metadata{}}
}

var stringPool = []string{
	"", "a", "ubuntu", "/etc/systemd/system/kubelet.service", "line one\nline two\ttabbed\r\n",
	`quote " and backslash \ and slash /`, "<html> & </html>", "\u2028\u2029", "ünïcödé ✓ 日本語 🚀",
	"\x00\x01\x1f\x7f", "bad utf8 \xff\xfe here", "\xc3", "__OSM_SECRET_bootstrapToken__",
	strings.Repeat("0123456789abcdef", 40), strings.Repeat("x<", 9),
}

var rawPool = []string{`{}`, `null`, `[1, 2, {"a": "b"}]`, `{"nested": {"deep": [true, false, null]}, "n": -1.5e3}`, `"str <&>"`, "  {\n \"ws\" : 1 }  "}

// fill sets v to a random value.
func fill(r *rand.Rand, v reflect.Value, depth int) {
	t := v.Type()
	if t == rawMessageType {
		if r.IntN(4) > 0 {
			v.SetBytes([]byte(rawPool[r.IntN(len(rawPool))]))
		}
		return
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(stringPool[r.IntN(len(stringPool))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		choices := []int64{0, 1, -1, 644, 1<<(bits-1) - 1, -1 << (bits - 1)}
		v.SetInt(choices[r.IntN(len(choices))])
	case reflect.Pointer:
		if depth < 6 && r.IntN(3) > 0 {
			v.Set(reflect.New(t.Elem()))
			fill(r, v.Elem(), depth+1)
		}
	case reflect.Slice:
		switch n := r.IntN(5); {
		case n == 0 || depth > 6:
		case t.Elem().Kind() == reflect.Uint8:
			b := make([]byte, r.IntN(40))
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			v.SetBytes(b)
		default:
			s := reflect.MakeSlice(t, n-1, n-1)
			for i := range n - 1 {
				fill(r, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		if n := r.IntN(5); n > 0 && depth <= 6 {
			m := reflect.MakeMap(t)
			for range n - 1 {
				k := reflect.New(t.Key()).Elem()
				fill(r, k, depth+1)
				e := reflect.New(t.Elem()).Elem()
				fill(r, e, depth+1)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				fill(r, v.Field(i), depth+1)
			}
		}
	default:
		panic(fmt.Sprintf("fill: the ABI gained a %s field; teach this test (and check wirejson handles it natively)", t))
	}
}

func TestMarshalMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		for _, v := range abiValues() {
			fill(r, reflect.ValueOf(v).Elem(), 0)
			want, wantErr := json.Marshal(v)
			got, err := Marshal(v)
			if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("case %d %T:\nencoding/json: %s (%v)\nwirejson:      %s (%v)", i, v, want, wantErr, got, err)
			}
		}
	}
}

func TestUnmarshalMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 400 {
		for _, v := range abiValues() {
			fill(r, reflect.ValueOf(v).Elem(), 0)
			compact, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			indented, _ := json.MarshalIndent(v, " ", "\t")
			for _, data := range [][]byte{compact, indented} {
				checkSameDecoding(t, fmt.Sprintf("case %d %T", i, v), reflect.TypeOf(v).Elem(), data)
			}
		}
	}
}

// checkSameDecoding decodes data with both implementations into fresh values of type t.
func checkSameDecoding(t *testing.T, name string, typ reflect.Type, data []byte) {
	t.Helper()
	want, got := reflect.New(typ).Interface(), reflect.New(typ).Interface()
	wantErr := json.Unmarshal(data, want)
	err := Unmarshal(data, got)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: input %q\nencoding/json error: %v\nwirejson error:      %v", name, data, wantErr, err)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: input %q\nencoding/json: %+v\nwirejson:      %+v", name, data, want, got)
	}
}

func TestUnmarshalEdgeCases(t *testing.T) {
	typ := reflect.TypeFor[abi.RenderRequest]()
	inputs := []string{
		`{"stage":"bootstrap","STAGE":"provisioning"}`,
		`{"Stage":"bootstrap","abiversion":"v1","ProvisioningUtility":"x"}`,
		`{"ſtage":"bootstrap"}`,
		`{"config":{"a":"1","a":"2"},"config":{"b":"3"}}`,
		`{"config":{"a":"1","a":null,"b":null}}`,
		`{"context":{"sshPublicKeys":["a",null,"b"]}}`,
		`{"context":{"sshPublicKeys":["a",1]}}`,
		`{"context":{"containerRuntime":{"containerdRegistryMirrors":{"a":["x"],"a":null,"b":[]}}}}`,
		`{"context":{"kubelet":{"featureGates":{"A":true,"A":null}}}}`,
		`{"config":null,"input":null,"context":null,"stage":null}`,
		`{"input":{"files":[{"path":"/a","permissions":420,"content":{"inline":{"data":"x"}}}],"units":[]}}`,
		`{"input":{"files":[{"permissions":1.5}]}}`,
		`{"input":{"files":[{"permissions":99999999999}]}}`,
		`{"input":{"files":[{"permissions":-0}]}}`,
		`{"input":{"files":[{"permissions":"644"}]}}`,
		`{"input":{"units":[{"enable":1}]}}`,
		`{"input":{"units":[{"enable":true,"mask":null}]}}`,
		`{"context":{"operatingSystem":{"spec":{"a":[1,2,{"b":null}]}}}}`,
		`{"context":{"operatingSystem":{"spec":null}}}`,
		`{"context":{"kubelet":{"featureGates":{"A":true,"B":false}}}}`,
		`{"stage":"\u0041\u00e9\ud83d\ude80\ud800x\udc00\"\\\/\b\f\n\r\t"}`,
		`{"stage":"\ud800\u0041"}`,
		"{\"stage\":\"raw \xff invalid\"}",
		"{\"stage\":\"ctl \x01\"}",
		`{"stage":"bad \x escape"}`,
		`{"stage":"\u12"}`,
		`{"stage":"unterminated`,
		`{"stage":"a"} trailing`,
		`{"stage":"a",}`,
		`{"unknown":[1,{"x":tru}]}`,
		`{"unknown":[1,{"x":true}],"stage":"a"}`,
		`{"unknown":01}`,
		`{"unknown":-}`,
		`{"unknown":1.}`,
		`{"unknown":1e}`,
		`{"unknown":1e+5}`,
		` {"stage" : "spaced" } `,
		`[]`,
		`"string"`,
		`null`,
		``,
		`{`,
		`{"input":{"files":[`,
		`{"stage":1}`,
		`{"config":{"a":1}}`,
		`{"config":[]}`,
	}
	for _, in := range inputs {
		checkSameDecoding(t, "edge case", typ, []byte(in))
	}
	encode := []string{`{"userData":"aGVsbG8="}`, `{"userData":"not base64!"}`, `{"userData":null}`, `{"userData":""}`}
	for _, in := range encode {
		checkSameDecoding(t, "bytes", reflect.TypeFor[abi.EncodeResponse](), []byte(in))
	}
}

func TestFallbackTypes(t *testing.T) {
	type inner struct{ X float64 }
	type odd struct {
		inner
		F     float64        `json:"f"`
		I     any            `json:"i"`
		A     [2]int         `json:"a"`
		S     int            `json:"s,string"`
		M     map[int]string `json:"m"`
		Plain string
	}
	v := odd{inner: inner{X: 1.5}, F: 0.1, I: map[string]any{"k": []any{1.0, "x"}}, A: [2]int{1, 2}, S: 7, M: map[int]string{2: "b", 1: "a"}, Plain: "p"}
	want, _ := json.Marshal(v)
	got, err := Marshal(v)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Marshal = %s (%v), want %s", got, err, want)
	}
	checkSameDecoding(t, "fallback", reflect.TypeFor[odd](), want)

	type partial struct {
		F float64 `json:"f"`
		I any     `json:"i"`
		A [2]int  `json:"a"`
		P *int    `json:"p"`
	}
	in := []byte(`{"f":1e3,"i":{"k":[1,"x",null]},"a":[3,4],"p":5}`)
	checkSameDecoding(t, "fallback fields", reflect.TypeFor[partial](), in)
	pv := partial{F: 2.5, I: "x", A: [2]int{5, 6}}
	want, _ = json.Marshal(pv)
	if got, err := Marshal(pv); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Marshal = %s (%v), want %s", got, err, want)
	}
}

func TestMarshalRawMessage(t *testing.T) {
	for _, raw := range []string{"  { \"a\" : [ 1 , \"<x> & \u2028\" ] }\n", `null`, `{"bad"`, `1 2`} {
		v := abi.OSInfo{Spec: json.RawMessage(raw)}
		want, wantErr := json.Marshal(v)
		got, err := Marshal(v)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Errorf("raw %q: encoding/json %s (%v), wirejson %s (%v)", raw, want, wantErr, got, err)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"abiVersion":"v1","stage":"bootstrap","config":{"a":"b"},"input":{"files":[{"path":"/x","content":{"inline":{"data":"\u00e9\n"}}}]}}`))
	f.Add([]byte(`{"context":{"operatingSystem":{"spec":{"x":[1,2.5,null,true]}},"kubelet":{"config":{"maxPods":110}}}}`))
	f.Add([]byte(`{"stage":"\ud83d\ude80","STAGE":1}`))
	typ := reflect.TypeFor[abi.RenderRequest]()
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSameDecoding(t, "fuzz", typ, data)
	})
}

func BenchmarkUnmarshal(b *testing.B) {
	data := benchData(b)
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			var r abi.RenderRequest
			if err := json.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wirejson", func(b *testing.B) {
		for b.Loop() {
			var r abi.RenderRequest
			if err := Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchData(b *testing.B) []byte {
	req := abi.RenderRequest{ABIVersion: "v1", Stage: abi.StageProvisioning, Config: map[string]string{"a": "b"}}
	for i := range 30 {
		req.Input.Files = append(req.Input.Files, abi.PlainFile(fmt.Sprintf("/etc/osm/file-%d.conf", i), 0o644,
			fmt.Sprintf("# generated\nkey-%d = value\nanother = setting with some text to make it realistic\n", i)))
	}
	data, err := json.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func TestAppendMarshal(t *testing.T) {
	v := abi.RenderResponse{ABIVersion: "v1", Config: abi.NodeConfig{Files: []abi.File{abi.PlainFile("/etc/a", 0o644, "<x>\n")}}}
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("prefix")
	got, err := AppendMarshal(buf, &v)
	if err != nil || string(got) != "prefix"+string(want) {
		t.Errorf("AppendMarshal = %s, %v; want prefix%s", got, err, want)
	}
	// Reusing the storage of an earlier result.
	again, err := AppendMarshal(got[:0], v)
	if err != nil || string(again) != string(want) {
		t.Errorf("AppendMarshal into reused storage = %s, %v; want %s", again, err, want)
	}
}

// TestAppendTextMatchesEncodingJSON: AppendText quotes like encoding/json with SetEscapeHTML(false).
func TestAppendTextMatchesEncodingJSON(t *testing.T) {
	for _, s := range append(stringPool, "memory.available<100Mi&x>y", strings.Repeat("<a&b>\"c\\", 9)+"\x01\x7f") {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := string(AppendText(nil, s)) + "\n"; got != want.String() {
			t.Errorf("AppendText(%q) = %s, want %s", s, got, want.String())
		}
	}
}
