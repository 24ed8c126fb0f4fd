// Package buildinfo identifies an OSM build: the release version stamped at link time, else what the Go
// toolchain recorded (the module version of `go install ...@version`, the VCS revision of a build in a checkout).
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Version is the release version, set with
// -ldflags "-X github.com/osmhq/osm/host/buildinfo.Version=v0.1.0" (hack/image.sh and the Makefile do).
var Version = ""

// Info describes a build.
type Info struct {
	// Version is the release version, the module version, or "devel".
	Version string `json:"version"`
	// Revision is the VCS commit the build came from, when recorded; Modified says the tree had changes.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// Get returns this binary's build information.
func Get() Info {
	i := Info{Version: Version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if i.Version == "" {
			i.Version = "devel"
		}
		return i
	}
	i.Go = bi.GoVersion
	if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		i.Version = bi.Main.Version
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// Short is one word for logs and render hashes: the version, and for a development build the revision
// ("devel+0123abcd4567", "-dirty" when the tree had changes).
func (i Info) Short() string {
	if i.Version != "devel" || i.Revision == "" {
		return i.Version
	}
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	s := i.Version + "+" + rev
	if i.Modified {
		s += "-dirty"
	}
	return s
}

// String is the line `-version` prints.
func (i Info) String() string {
	var extra []string
	if i.Revision != "" {
		r := "commit " + i.Revision
		if i.Modified {
			r += " (modified)"
		}
		extra = append(extra, r)
	}
	if i.Time != "" {
		extra = append(extra, i.Time)
	}
	if i.Go != "" {
		extra = append(extra, i.Go)
	}
	if len(extra) == 0 {
		return i.Version
	}
	return fmt.Sprintf("%s (%s)", i.Version, strings.Join(extra, ", "))
}
