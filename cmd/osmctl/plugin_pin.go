package main

import (
	"fmt"
	"os"
	"regexp"

	"sigs.k8s.io/yaml"
)

// pinProfileImage sets spec.plugin.image of the profile in path to ref and returns the image it replaced.
// Only that value changes: comments and layout stay. With check, it only checks that the file has exactly
// one spec.plugin.image to replace.
func pinProfileImage(path, ref string, check bool) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--pin-profile: %w", err)
	}
	var doc struct {
		Kind string `json:"kind"`
		Spec struct {
			Plugin *struct {
				Image string `json:"image"`
			} `json:"plugin"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "", fmt.Errorf("--pin-profile %s: %w", path, err)
	}
	if doc.Kind != "OperatingSystemProfile" || doc.Spec.Plugin == nil || doc.Spec.Plugin.Image == "" {
		return "", fmt.Errorf("--pin-profile %s: not an OperatingSystemProfile with spec.plugin.image", path)
	}
	old := doc.Spec.Plugin.Image
	re := regexp.MustCompile(`(?m)^([ \t]+image:[ \t]*)(["']?)` + regexp.QuoteMeta(old) + `(["']?)([ \t]*(#.*)?)$`)
	if n := len(re.FindAllIndex(data, -1)); n != 1 {
		return "", fmt.Errorf("--pin-profile %s: found spec.plugin.image %q %d times as `image: %s`; set it by hand", path, old, n, old)
	}
	if check {
		return old, nil
	}
	out := re.ReplaceAllFunc(data, func(m []byte) []byte {
		g := re.FindSubmatch(m)
		return []byte(string(g[1]) + ref + string(g[4]))
	})
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, out, info.Mode().Perm()); err != nil {
		return "", fmt.Errorf("--pin-profile: %w", err)
	}
	return old, nil
}
