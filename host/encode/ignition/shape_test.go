package ignition

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/osmhq/osm/sdk/abi"
)

// TestOnlyFileDataIsLeftOutOfTheShape: configs that differ only in the data of file contents (what differs
// between the MachineDeployments of one profile: credentials, names) share a shape, so Ignition validates the
// first only; a difference in anything the validator reads makes another shape, and an invalid config is
// refused even when a config of almost the same shape was accepted before.
func TestOnlyFileDataIsLeftOutOfTheShape(t *testing.T) {
	base := func(token string) *abi.NodeConfig {
		return &abi.NodeConfig{
			Files: []abi.File{abi.PlainFile("/etc/kubernetes/bootstrap-token", 0o600, token)},
			Units: []abi.Unit{{Name: "setup.service", Enable: ptr.To(true),
				Content: ptr.To("[Unit]\nDescription=setup\n[Service]\nExecStart=/opt/bin/setup\n[Install]\nWantedBy=multi-user.target\n")}},
			UserSSHKeys: []string{"ssh-ed25519 AAAA first"},
		}
	}
	shape := func(cfg *abi.NodeConfig) [32]byte {
		t.Helper()
		data, err := Encode(cfg, Options{Hostname: "<MACHINE_NAME>"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), `"path":"`+cfg.Files[0].Path) {
			t.Fatalf("encoded config lacks its file: %s", data)
		}
		out, err := build(cfg, Options{Hostname: "<MACHINE_NAME>"})
		if err != nil {
			t.Fatal(err)
		}
		s, err := shapeOf(out)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := shape(base("abcdef.0123456789abcdef"))
	if !accepted.has(first) {
		t.Fatal("an encoded config's shape was not remembered as accepted")
	}
	if got := shape(base("zyxwvu.fedcba9876543210 and a much longer value: " + strings.Repeat("x", 100))); got != first {
		t.Error("another token in a file changed the shape")
	}
	for name, change := range map[string]func(*abi.NodeConfig){
		"path":         func(c *abi.NodeConfig) { c.Files[0].Path = "/etc/kubernetes/other" },
		"mode":         func(c *abi.NodeConfig) { m, _ := abi.WireMode(0o644); c.Files[0].Permissions = &m },
		"compression":  func(c *abi.NodeConfig) { c.Files[0].Content.Inline.Data = strings.Repeat("a", 4096) },
		"unit content": func(c *abi.NodeConfig) { *c.Units[0].Content += "# another line\n" },
		"unit enabled": func(c *abi.NodeConfig) { c.Units[0].Enable = ptr.To(false) },
		"ssh key":      func(c *abi.NodeConfig) { c.UserSSHKeys = []string{"ssh-ed25519 AAAA second"} },
		"another file": func(c *abi.NodeConfig) { c.Files = append(c.Files, abi.PlainFile("/etc/x", 0o644, "x")) },
		"another unit": func(c *abi.NodeConfig) { c.Units = append(c.Units, abi.Unit{Name: "x.service", Mask: ptr.To(true)}) },
	} {
		cfg := base("abcdef.0123456789abcdef")
		change(cfg)
		if shape(cfg) == first {
			t.Errorf("%s: same shape as before the change", name)
		}
	}
	for name, change := range map[string]func(*abi.NodeConfig){
		"invalid unit content": func(c *abi.NodeConfig) { c.Units[0].Content = ptr.To("not a unit file [[[") },
		"relative path":        func(c *abi.NodeConfig) { c.Files[0].Path = "etc/kubernetes/bootstrap-token" },
	} {
		cfg := base("abcdef.0123456789abcdef")
		change(cfg)
		if _, err := Encode(cfg, Options{Hostname: "<MACHINE_NAME>"}); err == nil {
			t.Errorf("%s: accepted after a config of nearly the same shape was", name)
		}
	}
}
