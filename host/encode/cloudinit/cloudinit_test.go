package cloudinit_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"k8s.io/utils/ptr"

	"github.com/osmhq/osm/host/encode/cloudinit"
	"github.com/osmhq/osm/host/encode/cloudinit/cloudinittest"
	"github.com/osmhq/osm/sdk/abi"
)

func TestEncodeParsesBackAndPassesSchema(t *testing.T) {
	tricky := "key: value\n  - not: a list\n'quoted' \"double\" # not a comment\n"
	cfg := &abi.NodeConfig{
		Files: []abi.File{
			abi.PlainFile("/etc/tricky.conf", 0o600, tricky),
			// As upstream: data is the plain content, the encoding is how it travels in the user-data.
			{Path: "/opt/bin/setup", Permissions: ptr.To[int32](755),
				Content: abi.FileContent{Inline: &abi.FileContentInline{Encoding: "b64", Data: "#!/bin/bash\necho hi\n"}}},
			{Path: "/etc/zipped", Content: abi.FileContent{Inline: &abi.FileContentInline{Encoding: "gzip+base64", Data: "unzipped\n"}}},
		},
		Units: []abi.Unit{
			{Name: "setup.service", Enable: ptr.To(true), Content: ptr.To("[Service]\nExecStart=/opt/bin/setup\n[Install]\nWantedBy=multi-user.target\n"),
				DropIns: []abi.DropIn{{Name: "10-env.conf", Content: "[Service]\nEnvironment=A=1\n"}}},
			{Name: "swap.target", Mask: ptr.To(true)},
			{Name: "containerd.service", DropIns: []abi.DropIn{{Name: "limits.conf", Content: "[Service]\nLimitNOFILE=1048576\n"}}},
		},
		UserSSHKeys: []string{"ssh-ed25519 AAAA test@osm"},
		Modules: &abi.Modules{
			BootCMD: []string{"echo boot"},
			RunCMD:  []string{"systemctl restart setup.service"},
			YumRepos: map[string]map[string]string{
				"kubernetes": {"name": "Kubernetes", "baseurl": "https://pkgs.k8s.io/core:/stable:/v1.33/rpm/", "enabled": "1", "gpgcheck": "1"},
			},
			RHSubscription: map[string]string{"auto-attach": "true", "add-pool": "pool1, pool2", "username": "user"},
		},
	}
	data, err := cloudinit.Encode(cfg, cloudinit.Options{Hostname: "<MACHINE_NAME>"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("#cloud-config\n")) {
		t.Fatalf("missing header:\n%s", data)
	}
	cloudinittest.Validate(t, "encoded", data)

	var got cloudinit.Document
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := cloudinit.Document{
		Hostname:          "<MACHINE_NAME>",
		SSHPwauth:         ptr.To(false),
		SSHAuthorizedKeys: []string{"ssh-ed25519 AAAA test@osm"},
		RHSubscription:    map[string]any{"auto-attach": true, "add-pool": []any{"pool1", "pool2"}, "username": "user"},
		YumRepos: map[string]map[string]any{"kubernetes": {"name": "Kubernetes", "baseurl": "https://pkgs.k8s.io/core:/stable:/v1.33/rpm/",
			"enabled": true, "gpgcheck": "1"}},
		WriteFiles: []cloudinit.WriteFile{
			{Path: "/etc/tricky.conf", Permissions: "0600", Content: tricky},
			{Path: "/opt/bin/setup", Permissions: "0755", Encoding: "b64", Content: base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\necho hi\n"))},
			{Path: "/etc/zipped", Permissions: "0644", Encoding: "gz+b64", Content: gzipped(t, "unzipped\n")},
			{Path: "/etc/systemd/system/setup.service", Permissions: "0644", Content: *cfg.Units[0].Content},
			{Path: "/etc/systemd/system/setup.service.d/10-env.conf", Permissions: "0644", Content: "[Service]\nEnvironment=A=1\n"},
			{Path: "/etc/systemd/system/containerd.service.d/limits.conf", Permissions: "0644", Content: "[Service]\nLimitNOFILE=1048576\n"},
		},
		BootCMD: []string{"echo boot"},
		RunCMD: []string{"systemctl daemon-reload", "systemctl enable --now setup.service", "systemctl mask --now swap.target",
			"systemctl restart setup.service"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("document (-want +got):\n%s", diff)
	}
}

// gzipped is what the encoder must produce for a gzip encoding: it must decompress back to the content.
func gzipped(t *testing.T, want string) string {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write([]byte(want))
	zw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func TestEncodeErrorsNameTheFile(t *testing.T) {
	for name, tc := range map[string]struct {
		file abi.File
		want string
	}{
		"bad permissions": {abi.File{Path: "/a", Permissions: ptr.To[int32](678), Content: abi.FileContent{Inline: &abi.FileContentInline{Data: "x"}}}, "files[0] (/a): permissions 678"},
		"no content":      {abi.File{Path: "/b"}, "files[0] (/b): content.inline is missing"},
		"bad encoding":    {abi.File{Path: "/c", Content: abi.FileContent{Inline: &abi.FileContentInline{Encoding: "rot13", Data: "x"}}}, `files[0] (/c): unknown encoding "rot13"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := cloudinit.Encode(&abi.NodeConfig{Files: []abi.File{tc.file}}, cloudinit.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestEncodeIsDeterministic(t *testing.T) {
	cfg := &abi.NodeConfig{Modules: &abi.Modules{
		YumRepos:       map[string]map[string]string{"b": {"name": "b", "baseurl": "x"}, "a": {"name": "a", "baseurl": "y"}},
		RHSubscription: map[string]string{"username": "u", "password": "p", "org": "o"},
	}}
	first, err := cloudinit.Encode(cfg, cloudinit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, _ := cloudinit.Encode(cfg, cloudinit.Options{})
		if !bytes.Equal(first, again) {
			t.Fatalf("output differs between runs:\n%s\n---\n%s", first, again)
		}
	}
}

func TestCoreOSUnitsForFlatcar(t *testing.T) {
	cfg := &abi.NodeConfig{Units: []abi.Unit{
		{Name: "osm-bootstrap.service", Enable: ptr.To(true), Content: ptr.To("[Service]\nExecStart=/opt/bin/osm-bootstrap\n[Install]\nWantedBy=multi-user.target\n"),
			DropIns: []abi.DropIn{{Name: "10-env.conf", Content: "[Service]\nEnvironment=A=1\n"}}},
		{Name: "locksmithd.service", Mask: ptr.To(true)},
	}}
	data, err := cloudinit.Encode(cfg, cloudinit.Options{CoreOSUnits: true})
	if err != nil {
		t.Fatal(err)
	}
	cloudinittest.Validate(t, "coreos", data)
	var got cloudinit.Document
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := &cloudinit.CoreOS{Units: []cloudinit.CoreOSUnit{
		{Name: "osm-bootstrap.service", Enable: true, Command: "start", Content: *cfg.Units[0].Content,
			DropIns: []cloudinit.CoreOSDropIn{{Name: "10-env.conf", Content: "[Service]\nEnvironment=A=1\n"}}},
		{Name: "locksmithd.service", Mask: true},
	}}
	if diff := cmp.Diff(want, got.CoreOS); diff != "" {
		t.Errorf("coreos section (-want +got):\n%s", diff)
	}
	if len(got.RunCMD) != 0 || len(got.WriteFiles) != 0 {
		t.Errorf("units must not also be written as files and runcmd: %v %v", got.RunCMD, got.WriteFiles)
	}
}
