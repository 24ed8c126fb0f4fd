package plugins

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// DefaultProfileYAML returns the embedded default profile name as shipped, comments included, for operators who
// start their own profile from it (osmctl profile export).
func DefaultProfileYAML(name string) ([]byte, error) {
	data, err := osps.ReadFile(path.Join("osps", name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("no default profile %q: the default profiles are %s", name, strings.Join(DefaultProfileNames(), ", "))
	}
	return data, nil
}

// DefaultProfileNames lists the embedded default profiles.
func DefaultProfileNames() []string {
	entries, _ := fs.ReadDir(osps, "osps")
	var out []string
	for _, e := range entries {
		if path.Ext(e.Name()) == ".yaml" {
			out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
		}
	}
	sort.Strings(out)
	return out
}
