package node

import (
	"fmt"
	"strconv"
	"strings"
)

// KubeVersion is a Kubernetes version. The plugin parses it itself rather than pulling in a semver library,
// because every dependency adds to the size of the WebAssembly module the controller has to compile.
type KubeVersion struct {
	Major, Minor, Patch int
}

// ParseKubeVersion reads "1.33.2" or "v1.33.2" (pre-release and build suffixes are ignored).
func ParseKubeVersion(s string) (KubeVersion, error) {
	v := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return KubeVersion{}, fmt.Errorf("kubelet version %q is not major.minor.patch", s)
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return KubeVersion{}, fmt.Errorf("kubelet version %q is not major.minor.patch", s)
		}
		n[i] = x
	}
	return KubeVersion{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

// AtLeast reports whether v is major.minor or newer.
func (v KubeVersion) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// String is the version with a leading v, as release URLs spell it.
func (v KubeVersion) String() string { return fmt.Sprintf("v%d.%d.%d", v.Major, v.Minor, v.Patch) }
