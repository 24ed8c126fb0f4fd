package ignition_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"net/url"
	"strings"
	"testing"

	v3 "github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/osmhq/osm/host/encode/ignition"
	"github.com/osmhq/osm/sdk/abi"
)

// contents decodes an Ignition resource back to bytes, the way Ignition does on the node.
func contents(t *testing.T, r types.Resource) string {
	t.Helper()
	src := *r.Source
	var data []byte
	switch {
	case strings.HasPrefix(src, "data:;base64,"):
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(src, "data:;base64,"))
		if err != nil {
			t.Fatal(err)
		}
		data = raw
	case strings.HasPrefix(src, "data:,"):
		s, err := url.PathUnescape(strings.TrimPrefix(src, "data:,"))
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(s)
	default:
		t.Fatalf("unexpected source %q", src)
	}
	if r.Compression != nil && *r.Compression == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		data, _ = io.ReadAll(zr)
	}
	return string(data)
}

func TestEncodeParsesBackWithIgnition(t *testing.T) {
	big := strings.Repeat("a fairly repetitive line of a large file\n", 100)
	cfg := &abi.NodeConfig{
		Files: []abi.File{
			abi.PlainFile("/etc/kubernetes/kubelet.conf", 0o600, "apiVersion: v1\nkind: Config # with: yaml & symbols %?\n"),
			abi.PlainFile("/opt/bin/setup", 0o755, big),
		},
		Units: []abi.Unit{
			{Name: "setup.service", Enable: ptr.To(true), Content: ptr.To("[Unit]\nDescription=setup\n[Service]\nType=oneshot\nExecStart=/opt/bin/setup\n[Install]\nWantedBy=multi-user.target\n")},
			{Name: "update-engine.service", Mask: ptr.To(true)},
			{Name: "containerd.service", DropIns: []abi.DropIn{{Name: "10-limits.conf", Content: "[Service]\nLimitNOFILE=1048576\n"}}},
		},
		UserSSHKeys: []string{"ssh-ed25519 AAAA test@osm"},
		Modules:     &abi.Modules{RunCMD: []string{"echo run"}},
	}
	data, err := ignition.Encode(cfg, ignition.Options{Hostname: "<MACHINE_NAME>"})
	if err != nil {
		t.Fatal(err)
	}
	got, rpt, err := v3.Parse(data)
	if err != nil || len(rpt.Entries) > 0 {
		t.Fatalf("ignition parser: err=%v report=%s", err, rpt.String())
	}
	if got.Ignition.Version != "3.3.0" {
		t.Errorf("version = %s", got.Ignition.Version)
	}

	type file struct {
		Path, Content string
		Mode          int
	}
	var files []file
	for _, f := range got.Storage.Files {
		if f.Overwrite == nil || !*f.Overwrite {
			t.Errorf("%s: overwrite not set; Ignition would fail on an existing file", f.Path)
		}
		files = append(files, file{f.Path, contents(t, f.Contents), *f.Mode})
	}
	wantFiles := []file{
		{"/etc/hostname", "<MACHINE_NAME>\n", 0o644},
		{"/etc/kubernetes/kubelet.conf", "apiVersion: v1\nkind: Config # with: yaml & symbols %?\n", 0o600},
		{"/opt/bin/setup", big, 0o755},
		{ignition.ModulesScriptPath, "#!/bin/bash\n# bootcmd and runcmd of the OperatingSystemConfig, run once at first boot.\nset -xeuo pipefail\necho run\n", 0o755},
	}
	if diff := cmp.Diff(wantFiles, files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if got.Storage.Files[2].Contents.Compression == nil {
		t.Errorf("large repetitive file was not compressed")
	}

	var units []string
	for _, u := range got.Systemd.Units {
		units = append(units, u.Name)
	}
	if diff := cmp.Diff([]string{"setup.service", "update-engine.service", "containerd.service", ignition.ModulesUnitName}, units); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	if !*got.Systemd.Units[0].Enabled || !*got.Systemd.Units[1].Mask || got.Systemd.Units[2].Contents != nil ||
		*got.Systemd.Units[2].Dropins[0].Contents != "[Service]\nLimitNOFILE=1048576\n" {
		t.Errorf("unit settings lost: %+v", got.Systemd.Units)
	}
	if len(got.Passwd.Users) != 1 || got.Passwd.Users[0].Name != "core" || string(got.Passwd.Users[0].SSHAuthorizedKeys[0]) != "ssh-ed25519 AAAA test@osm" {
		t.Errorf("users = %+v", got.Passwd.Users)
	}
}

func TestEncodeRejectsWhatIgnitionCannotExpress(t *testing.T) {
	_, err := ignition.Encode(&abi.NodeConfig{Modules: &abi.Modules{YumRepos: map[string]map[string]string{"x": {"baseurl": "y"}}}}, ignition.Options{})
	if err == nil || !strings.Contains(err.Error(), "yum_repos") {
		t.Fatalf("err = %v", err)
	}
	_, err = ignition.Encode(&abi.NodeConfig{Files: []abi.File{abi.PlainFile("relative/path", 0o644, "x")}}, ignition.Options{})
	if err == nil || !strings.Contains(err.Error(), "relative/path") {
		t.Fatalf("Ignition's validation did not catch a relative path: %v", err)
	}
}

func TestValidateReportsWarnings(t *testing.T) {
	// A unit with an invalid section is a warning in Ignition's report; OSM treats warnings as errors.
	cfg := &abi.NodeConfig{Units: []abi.Unit{{Name: "x.service", Content: ptr.To("not a unit file [[[")}}}
	if _, err := ignition.Encode(cfg, ignition.Options{}); err == nil {
		t.Fatal("invalid unit content accepted")
	}
}
