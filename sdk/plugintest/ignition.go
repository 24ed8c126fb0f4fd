package plugintest

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	v3 "github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/osmhq/osm/sdk/abi"
)

// IgnitionSpecVersion is the Ignition spec version the host writes (and IgnitionConfig reproduces).
const IgnitionSpecVersion = "3.3.0"

// Ignition's stand-ins for bootcmd and runcmd, as the host writes them (sdk/SPEC.md §10).
const (
	IgnitionCommandsPath = "/opt/osm/run-commands.sh"
	IgnitionCommandsUnit = "osm-run-commands.service"
)

// IgnitionConfig returns a stage as the final Ignition config (spec 3.3.0) a machine receives: the plugin's
// output with what the host adds to every plugin's output (sdk/SPEC.md §10: the host name and
// /etc/machine-name in the bootstrap stage off AWS, bootcmd and runcmd as a script run once by
// osm-run-commands.service, SSH keys for the user core) and the placeholders of secrets replaced by the values
// in secrets (SampleSecrets when nil). Like the host, it refuses what Ignition cannot express
// (rh_subscription, yum_repos). Validate the result with IgnitionValidate.
func IgnitionConfig(stage abi.Stage, provider string, cfg *abi.NodeConfig, secrets map[string]string) ([]byte, error) {
	if secrets == nil {
		secrets = SampleSecrets
	}
	final := substitute(cfg, secrets)
	out := types.Config{Ignition: types.Ignition{Version: IgnitionSpecVersion}}
	if stage == abi.StageBootstrap && provider != "aws" {
		out.Storage.Files = append(out.Storage.Files, ignitionFile("/etc/hostname", 0o644, MachineNamePlaceholder+"\n"))
		final.Files = append(final.Files, abi.PlainFile("/etc/machine-name", 0o600, MachineNamePlaceholder))
	}
	for _, f := range final.Files {
		mode, err := f.Mode()
		if err != nil {
			return nil, err
		}
		if f.Permissions == nil {
			mode = 0o644
		}
		if f.Content.Inline == nil {
			return nil, fmt.Errorf("file %s: content.inline is missing", f.Path)
		}
		out.Storage.Files = append(out.Storage.Files, ignitionFile(f.Path, int(mode), f.Content.Inline.Data))
	}
	for _, u := range final.Units {
		unit := types.Unit{Name: u.Name, Enabled: u.Enable, Mask: u.Mask}
		if u.Content != nil && *u.Content != "" {
			c := *u.Content
			unit.Contents = &c
		}
		for _, d := range u.DropIns {
			c := d.Content
			unit.Dropins = append(unit.Dropins, types.Dropin{Name: d.Name, Contents: &c})
		}
		out.Systemd.Units = append(out.Systemd.Units, unit)
	}
	if m := final.Modules; m != nil {
		if len(m.RHSubscription) > 0 || len(m.YumRepos) > 0 || m.YumRepoDir != "" {
			return nil, fmt.Errorf("modules.rh_subscription, modules.yum_repos and modules.yum_repo_dir are cloud-init only; the host refuses them with Ignition")
		}
		if len(m.BootCMD) > 0 || len(m.RunCMD) > 0 {
			script := "#!/bin/bash\n# bootcmd and runcmd of the OperatingSystemConfig, run once at first boot.\nset -xeuo pipefail\n" +
				strings.Join(append(append([]string(nil), m.BootCMD...), m.RunCMD...), "\n") + "\n"
			out.Storage.Files = append(out.Storage.Files, ignitionFile(IgnitionCommandsPath, 0o755, script))
			enabled := true
			unit := "[Unit]\nDescription=Run the bootcmd and runcmd commands of the OperatingSystemConfig\n" +
				"Wants=network-online.target\nAfter=network-online.target\n" +
				"ConditionPathExists=!/var/lib/osm/run-commands.done\n\n" +
				"[Service]\nType=oneshot\nRemainAfterExit=true\nExecStart=" + IgnitionCommandsPath + "\n" +
				"ExecStartPost=/bin/sh -c 'mkdir -p /var/lib/osm && touch /var/lib/osm/run-commands.done'\n\n" +
				"[Install]\nWantedBy=multi-user.target\n"
			out.Systemd.Units = append(out.Systemd.Units, types.Unit{Name: IgnitionCommandsUnit, Enabled: &enabled, Contents: &unit})
		}
	}
	if len(final.UserSSHKeys) > 0 {
		user := types.PasswdUser{Name: "core"}
		for _, k := range final.UserSSHKeys {
			user.SSHAuthorizedKeys = append(user.SSHAuthorizedKeys, types.SSHAuthorizedKey(k))
		}
		out.Passwd.Users = []types.PasswdUser{user}
	}
	return json.Marshal(out)
}

// ignitionFile is a file that replaces whatever is at path, its content a data URL (gzipped when that is
// smaller, as the host does).
func ignitionFile(path string, mode int, data string) types.File {
	overwrite := true
	src := "data:," + url.PathEscape(data)
	res := types.Resource{Source: &src}
	if len(data) >= 512 {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(data))
		_ = zw.Close()
		if c := "data:;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()); len(c) < len(src) {
			gz := "gzip"
			res = types.Resource{Source: &c, Compression: &gz}
		}
	}
	return types.File{Node: types.Node{Path: path, Overwrite: &overwrite}, FileEmbedded1: types.FileEmbedded1{Mode: &mode, Contents: res}}
}

// IgnitionValidate fails the test unless Ignition's own parser (github.com/coreos/ignition/v2, spec 3.3.0)
// accepts config without errors or warnings (the host treats warnings, such as a unit file systemd cannot
// parse, as errors too). It needs no tool on the machine.
func IgnitionValidate(t testing.TB, name string, config []byte) {
	t.Helper()
	if err := ignitionValidate(config); err != nil {
		t.Errorf("%s: Ignition rejects the config: %v\n--- config ---\n%s", name, err, config)
	}
}

func ignitionValidate(config []byte) error {
	_, rpt, err := v3.Parse(config)
	if err != nil {
		return fmt.Errorf("%w: %s", err, rpt.String())
	}
	if len(rpt.Entries) > 0 {
		return fmt.Errorf("%s", rpt.String())
	}
	return nil
}

// ValidateUserData encodes a stage as the host would for the request's provisioning utility and validates it
// with that utility's own parser: cloud-init (UserData and CloudInitSchema, which needs cloud-init installed)
// or Ignition (IgnitionConfig and IgnitionValidate). It is the last step of a plugin's stage test; utilities
// a plugin encodes itself (osm_encode) are not covered.
func ValidateUserData(t testing.TB, req *abi.RenderRequest, cfg *abi.NodeConfig) {
	t.Helper()
	name := req.Context.CloudProvider.Name + "/" + string(req.Stage)
	switch req.ProvisioningUtility {
	case abi.UtilityIgnition:
		data, err := IgnitionConfig(req.Stage, req.Context.CloudProvider.Name, cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		IgnitionValidate(t, name, data)
	case abi.UtilityCloudInit, "":
		data, err := UserData(req.Stage, req.Context.CloudProvider.Name, cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		CloudInitSchema(t, name, data)
	default:
		t.Fatalf("%s: provisioning utility %q is encoded by the plugin (osm_encode); validate its output yourself", name, req.ProvisioningUtility)
	}
}
