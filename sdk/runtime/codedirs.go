package runtime

import (
	goruntime "runtime"
	godebug "runtime/debug"
	"strings"
)

// CodeDirs are the directories under a cache directory (Config.CacheDir), slash-separated, that this build's
// runtime reads code from: wazero's compilation cache (with and without interrupts) and the snapshots. Each
// names the wazero version, and wazero's names the architecture too, so a cache shared by several builds (the
// precompiled default plugins hold the release build's and the test binaries') has entries this build never
// opens: a host checks only these (pluginhost's verifyArtifacts), and checking the others would cost a hash
// of code no process here runs.
func CodeDirs() []string {
	wz := "wazero-" + wazeroCacheVersion() + "-" + goruntime.GOARCH + "-" + goruntime.GOOS
	return []string{wz, "nointerrupt/" + wz, "osm-snapshots/" + wazeroVersion()}
}

// wazeroCacheVersion is the version wazero puts into its compilation cache's directory name: the linker's
// value when the build set one (for the test binaries' precompile: "dev"), else the build information's, as
// wazero's internal/version.GetWazeroVersion reads it. TestCodeDirsAreWazeros checks it against the directory
// wazero creates.
func wazeroCacheVersion() string {
	if linkedWazeroVersion != "" {
		return "dev"
	}
	v := ""
	if bi, ok := godebug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if strings.Contains(d.Path, "github.com/tetratelabs/wazero") {
				v = d.Version
			}
		}
		if v == "" || v == "(devel)" {
			v = bi.Main.Version
		}
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}
