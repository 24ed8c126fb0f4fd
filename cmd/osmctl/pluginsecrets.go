package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/osmhq/osm/host/render"
)

// pluginSecretValues turns render's --plugin-secret NAME=VALUE and NAME=@FILE flags into the values of the
// profile's plugin secrets. A secret without a flag keeps its placeholder, so the output shows where it goes;
// a flag for a name the profile does not declare is an error (a misspelling would silently keep the
// placeholder).
func pluginSecretValues(out *render.Output, flags []string) (map[string]string, error) {
	values := out.PluginSecretPlaceholders()
	for _, f := range flags {
		name, value, ok := strings.Cut(f, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--plugin-secret %q: want NAME=VALUE or NAME=@FILE", f)
		}
		if _, declared := values[name]; !declared {
			return nil, fmt.Errorf("--plugin-secret %s: the profile's spec.plugin.secrets has no secret %q (it has %s)", name, name, names(values))
		}
		if path, isFile := strings.CutPrefix(value, "@"); isFile {
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("--plugin-secret %s: %w", name, err)
			}
			value = string(data)
		}
		values[name] = value
	}
	return values, nil
}

func names(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
