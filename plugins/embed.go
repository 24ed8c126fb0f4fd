// Package plugins embeds the default OS plugins (built to plugins/dist by `make plugins`) and their default
// OperatingSystemProfiles, so a default install of OSM renders with no network access at all.
package plugins

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// The dist directory always holds .gitkeep, so the embed works before the plugins are built; a binary built that
// way has no built-in plugins and says so when a profile asks for one.
//
//go:embed all:dist
var dist embed.FS

//go:embed all:osps
var osps embed.FS

// Builtin returns the built-in plugin modules as <name>.wasm files. The result also has the method Locate
// (see BuiltinFS), with which the plugin host reads a module from the executable itself.
func Builtin() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err)
	}
	return BuiltinFS{FS: sub}
}

// Names lists the built-in plugins in fsys (Builtin() or a directory with the same layout).
func Names(fsys fs.FS) ([]string, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".wasm"); ok && !e.IsDir() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// DefaultProfiles returns the default OperatingSystemProfiles, without a namespace: the controller installs
// them into its own.
func DefaultProfiles() ([]*osmv1alpha1.OperatingSystemProfile, error) {
	entries, err := fs.ReadDir(osps, "osps")
	if err != nil {
		return nil, err
	}
	var out []*osmv1alpha1.OperatingSystemProfile
	for _, e := range entries {
		if path.Ext(e.Name()) != ".yaml" {
			continue
		}
		data, err := osps.ReadFile(path.Join("osps", e.Name()))
		if err != nil {
			return nil, err
		}
		osp := &osmv1alpha1.OperatingSystemProfile{}
		if err := yaml.UnmarshalStrict(data, osp); err != nil {
			return nil, fmt.Errorf("default profile %s: %w", e.Name(), err)
		}
		out = append(out, osp)
	}
	return out, nil
}
