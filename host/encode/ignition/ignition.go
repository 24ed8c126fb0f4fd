// Package ignition encodes a rendered node configuration as an Ignition config (spec v3.3.0, which every
// Flatcar release with Ignition v2 reads).
//
// The config is built from Ignition's own Go types and checked with Ignition's own parser before it is
// returned, so a configuration that Ignition would reject or warn about never reaches a node.
package ignition

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

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
	out, err := build(cfg, opts)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	shape, err := shapeOf(out)
	if err != nil {
		return nil, err
	}
	if !accepted.has(shape) {
		if err := Validate(data); err != nil {
			return nil, fmt.Errorf("encoded Ignition config is not valid: %w", err)
		}
		accepted.add(shape)
	}
	return data, nil
}

// build returns cfg as an Ignition config.
func build(cfg *abi.NodeConfig, opts Options) (types.Config, error) {
	if err := nodeconfig.Check(cfg); err != nil {
		return types.Config{}, err
	}
	out := types.Config{Ignition: types.Ignition{Version: SpecVersion}}
	files, err := Files(cfg, opts)
	if err != nil {
		return types.Config{}, err
	}
	out.Storage.Files = files
	out.Systemd.Units = Units(cfg)
	modules, err := Modules(cfg)
	if err != nil {
		return types.Config{}, err
	}
	if modules != nil {
		out.Storage.Files = append(out.Storage.Files, modules.Script)
		out.Systemd.Units = append(out.Systemd.Units, modules.Unit)
	}
	out.Passwd.Users = Users(cfg, opts)
	return out, nil
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

// accepted remembers the shapes of configs Ignition's validator accepted. Validation is most of the cost of
// encoding (about 1 ms a config, 13% of the controller's CPU profile when a fifth of 500 MachineDeployments run
// Flatcar, make bench-compare OSM_BENCH_OS=ubuntu,flatcar,rhel,rockylinux,amzn2, 2026-11-27), and the
// MachineDeployments of one profile differ only in the credentials and names substituted into file contents.
var accepted = shapes{seen: map[[sha256.Size]byte]struct{}{}}

// maxShapes bounds the remembered shapes; when full, the memo starts over.
const maxShapes = 4096

type shapes struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]struct{}
}

func (s *shapes) has(k [sha256.Size]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.seen[k]
	return ok
}

func (s *shapes) add(k [sha256.Size]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) >= maxShapes {
		clear(s.seen)
	}
	s.seen[k] = struct{}{}
}

// shapeOf hashes everything of cfg that Ignition's validator judges, which is everything but the data in
// the data URLs of file contents: file() writes those itself, and any bytes make a valid data URL. Paths,
// modes, compression, users, and units with their whole contents (Ignition parses unit syntax) are part of
// the shape, so a config that differs from an accepted one in anything the validator reads is validated.
func shapeOf(cfg types.Config) ([sha256.Size]byte, error) {
	files := make([]types.File, len(cfg.Storage.Files))
	for i, f := range cfg.Storage.Files {
		if src := f.Contents.Source; src != nil && strings.HasPrefix(*src, "data:") {
			mediaType, _, _ := strings.Cut(*src, ",")
			f.Contents.Source = &mediaType
		}
		files[i] = f
	}
	cfg.Storage.Files = files
	data, err := json.Marshal(cfg)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(data), nil
}
