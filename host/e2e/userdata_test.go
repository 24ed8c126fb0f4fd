//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/osmhq/osm/host/encode/cloudinit"
	"github.com/osmhq/osm/host/render"
)

// machineUserData is what machine-controller hands a new machine: the bootstrap Secret's cloud-config with
// <MACHINE_NAME> replaced by the machine's name.
func machineUserData(bootstrap []byte, machine string) []byte {
	return bytes.ReplaceAll(bootstrap, []byte(render.MachineNamePlaceholder), []byte(machine))
}

// cloudFile is a write_files entry, decoded.
type cloudFile struct {
	Path    string
	Mode    uint32
	Content []byte
}

// cloudConfigFiles decodes the write_files of a #cloud-config document.
func cloudConfigFiles(t testing.TB, data []byte) []cloudFile {
	t.Helper()
	var doc cloudinit.Document
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		t.Fatalf("parsing cloud-config: %v", err)
	}
	var out []cloudFile
	for _, f := range doc.WriteFiles {
		content, err := decodeContent(f.Encoding, f.Content)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		mode, err := strconv.ParseUint(f.Permissions, 8, 32)
		if err != nil {
			t.Fatalf("%s: permissions %q: %v", f.Path, f.Permissions, err)
		}
		out = append(out, cloudFile{Path: f.Path, Mode: uint32(mode), Content: content})
	}
	return out
}

func decodeContent(encoding, content string) ([]byte, error) {
	switch encoding {
	case "":
		return []byte(content), nil
	case "b64", "base64":
		return base64.StdEncoding.DecodeString(content)
	case "gz+b64", "gzip+base64":
		raw, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(zr)
	}
	return nil, fmt.Errorf("unknown encoding %q", encoding)
}

// rewriteCloudConfig returns data with old replaced by new in every write_files content (decoded, replaced and
// encoded again the same way), as someone editing a machine's user-data would.
func rewriteCloudConfig(t *testing.T, data []byte, old, new string) []byte {
	t.Helper()
	var doc cloudinit.Document
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	replaced := 0
	for i, f := range doc.WriteFiles {
		content, err := decodeContent(f.Encoding, f.Content)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(content, []byte(old)) {
			continue
		}
		replaced++
		content = bytes.ReplaceAll(content, []byte(old), []byte(new))
		switch f.Encoding {
		case "":
			doc.WriteFiles[i].Content = string(content)
		case "b64", "base64":
			doc.WriteFiles[i].Content = base64.StdEncoding.EncodeToString(content)
		default:
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			_, _ = zw.Write(content)
			_ = zw.Close()
			doc.WriteFiles[i].Content = base64.StdEncoding.EncodeToString(b.Bytes())
		}
	}
	if replaced == 0 {
		t.Fatalf("%q is in no write_files entry of the user-data", old)
	}
	out, err := yamlv3.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(cloudinit.Header), out...)
}

// tokenPattern is a bootstrap token ("<id>.<secret>") as the bootstrap script quotes it.
var tokenPattern = regexp.MustCompile(`'([a-z0-9]{6}\.[a-z0-9]{16})'`)

// provisioningToken finds the token the bootstrap script fetches with (the MachineDeployment's bootstrap
// token) in the bootstrap user-data's files.
func provisioningToken(t *testing.T, data []byte) string {
	t.Helper()
	for _, f := range cloudConfigFiles(t, data) {
		if m := tokenPattern.FindSubmatch(f.Content); m != nil {
			return string(m[1])
		}
	}
	t.Fatal("no bootstrap token in the bootstrap user-data")
	return ""
}

func fileByPath(files []cloudFile, path string) *cloudFile {
	for i := range files {
		if files[i].Path == path {
			return &files[i]
		}
	}
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
