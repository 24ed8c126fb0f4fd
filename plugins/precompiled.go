package plugins

import (
	"os"
	"path/filepath"
	goruntime "runtime"
)

// PrecompiledDirName is the directory next to osm-controller where the image ships the default plugins'
// machine code (make image); make plugins compiles it into plugins/compiled.
const PrecompiledDirName = "osm-plugins-compiled"

// PrecompiledDir returns the directory of the default plugins' precompiled machine code (see
// plugin.Config.Precompiled): PrecompiledDirName next to the running executable (the image), else plugins/compiled
// of the source tree this package was built from, when make plugins filled it (tests, go run); "" when
// there is none, and the hosts compile.
func PrecompiledDir() string {
	if exe, err := os.Executable(); err == nil {
		if dir := filepath.Join(filepath.Dir(exe), PrecompiledDirName); isDir(dir) {
			return dir
		}
	}
	if _, file, _, ok := goruntime.Caller(0); ok {
		if dir := filepath.Join(filepath.Dir(file), "compiled"); isDir(dir) {
			return dir
		}
	}
	return ""
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
