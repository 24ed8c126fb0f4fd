// Package ignition encodes a rendered node configuration as an Ignition config (spec v3.3.0, which every
// Flatcar release with Ignition v2 reads).
//
// The config is built from Ignition's own Go types and checked with Ignition's own parser before it is
// returned, so a configuration that Ignition would reject or warn about never reaches a node.
package ignition

import (
	"encoding/json"
	"fmt"

	v3 "github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/osmhq/osm/host/nodeconfig"
	"github.com/osmhq/osm/sdk/abi"
)

// SpecVersion is the Ignition spec version of the configs this package writes.
const SpecVersion = "3.3.0"

// Options are the per-stage settings that do not come from the configuration itself.
type Options struct {
	// Hostname, when set, is written to /etc/hostname. machine-controller replaces the placeholder
	// "<MACHINE_NAME>" with the machine's name.
	Hostname string
	// User is the user the SSH keys are authorized for; "core" when empty.
	User string
}

// Encode returns the Ignition JSON for cfg.
func Encode(cfg *abi.NodeConfig, opts Options) ([]byte, error) {
	if err := nodeconfig.Check(cfg); err != nil {
		return nil, err
	}
	out := types.Config{Ignition: types.Ignition{Version: SpecVersion}}
	files, err := Files(cfg, opts)
	if err != nil {
		return nil, err
	}
	out.Storage.Files = files
	out.Systemd.Units = Units(cfg)
	modules, err := Modules(cfg)
	if err != nil {
		return nil, err
	}
	if modules != nil {
		out.Storage.Files = append(out.Storage.Files, modules.Script)
		out.Systemd.Units = append(out.Systemd.Units, modules.Unit)
	}
	out.Passwd.Users = Users(cfg, opts)

	data, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	if err := Validate(data); err != nil {
		return nil, fmt.Errorf("encoded Ignition config is not valid: %w", err)
	}
	return data, nil
}

// Validate parses data with Ignition's parser for SpecVersion and fails on any error or warning.
func Validate(data []byte) error {
	_, rpt, err := v3.Parse(data)
	if err != nil {
		return fmt.Errorf("%w: %s", err, rpt.String())
	}
	if len(rpt.Entries) > 0 {
		return fmt.Errorf("ignition reports: %s", rpt.String())
	}
	return nil
}
