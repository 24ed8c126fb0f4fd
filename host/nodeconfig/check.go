package nodeconfig

import (
	"fmt"
	"path"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// Check reports the first structural problem of a configuration that no encoder could turn into valid
// user-data: relative or duplicate paths, bad permissions or encodings, unnamed or duplicate units. Errors name
// the offending element by path or unit name so an operator can find it in the profile.
func Check(cfg *abi.NodeConfig) error {
	seen := map[string]bool{}
	for i, f := range cfg.Files {
		where := fmt.Sprintf("files[%d] (%s)", i, f.Path)
		switch {
		case f.Path == "" || !strings.HasPrefix(f.Path, "/"):
			return fmt.Errorf("%s: path must be absolute", where)
		case path.Clean(f.Path) != f.Path:
			return fmt.Errorf("%s: path must be clean (no trailing slash, '..' or '//')", where)
		case seen[f.Path]:
			return fmt.Errorf("%s: duplicate path", where)
		}
		seen[f.Path] = true
		if _, err := Mode(f.Permissions); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if f.Content.Inline == nil {
			return fmt.Errorf("%s: content.inline is missing", where)
		}
		if _, err := ParseEncoding(f.Content.Inline.Encoding); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	units := map[string]bool{}
	for i, u := range cfg.Units {
		where := fmt.Sprintf("units[%d] (%s)", i, u.Name)
		if u.Name == "" || strings.Contains(u.Name, "/") || !strings.Contains(u.Name, ".") {
			return fmt.Errorf("%s: unit name must be a file name with a type suffix, e.g. kubelet.service", where)
		}
		if units[u.Name] {
			return fmt.Errorf("%s: duplicate unit", where)
		}
		units[u.Name] = true
		dropIns := map[string]bool{}
		for j, d := range u.DropIns {
			if d.Name == "" || strings.Contains(d.Name, "/") || !strings.HasSuffix(d.Name, ".conf") {
				return fmt.Errorf("%s.dropIns[%d] (%s): drop-in name must be a file name ending in .conf", where, j, d.Name)
			}
			if dropIns[d.Name] {
				return fmt.Errorf("%s.dropIns[%d] (%s): duplicate drop-in", where, j, d.Name)
			}
			dropIns[d.Name] = true
		}
	}
	return nil
}
