package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/osmhq/osm/sdk/runtime"
)

// runtimeConfig is the runtime a host with cfg runs, hooks aside: Serve's and Precompile's, so that what the
// build compiles is what a host looks for.
func (cfg HostConfig) runtimeConfig(hooks runtime.Hooks) runtime.Config {
	return runtime.Config{MemoryLimit: cfg.MemoryLimit, Timeout: cfg.Timeout, MemoryBudget: cfg.MemoryBudget,
		CacheDir: cfg.CacheDir, ReadOnlyCache: cfg.ReadOnlyCache, NoSnapshot: cfg.NoSnapshot, NoInterrupt: cfg.NoInterrupt, Hooks: hooks}
}

// Precompile loads each module file into a runtime configured as a host with cfg, which leaves their
// snapshots and machine code in cfg.CacheDir, and their digests in its ArtifactsFile: make plugins does it for the default plugins, so that neither a
// pod nor a test compiles them (SeedCache). It runs in the build, on the build's own modules: no tenant's
// code. Taking a snapshot compiles the module as it was built too, which a host that finds the snapshot never
// needs: that first pass goes to a scratch directory, and only the snapshots are kept from it.
func Precompile(ctx context.Context, cfg HostConfig, files []string) error {
	if cfg.CacheDir == "" {
		return errors.New("precompiling needs a cache directory")
	}
	scratch, err := os.MkdirTemp("", "osm-precompile-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	first := cfg
	first.CacheDir = scratch
	if err := load(ctx, first, files); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return err
	}
	if err := os.CopyFS(filepath.Join(cfg.CacheDir, "osm-snapshots"), os.DirFS(filepath.Join(scratch, "osm-snapshots"))); err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := load(ctx, cfg, files); err != nil {
		return err
	}
	// The digests a host checks the cache against before it reads its first module (verifyArtifacts).
	return writeArtifacts(cfg.CacheDir)
}

func load(ctx context.Context, cfg HostConfig, files []string) error {
	rt, err := runtime.New(cfg.runtimeConfig(runtime.Hooks{}))
	if err != nil {
		return err
	}
	defer func() { _ = rt.Close(ctx) }()
	for _, f := range files {
		wasm, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if _, err := rt.Load(ctx, filepath.Base(f), wasm); err != nil {
			return fmt.Errorf("precompiling %s: %w", f, err)
		}
	}
	return nil
}

// BuiltinDir is the built-in host's cache directory under a supervisor's Host.CacheDir: only SeedBuiltins
// writes it, so it holds the build's code and nothing else (no host writes a cache).
func BuiltinDir(hostCacheDir string) string { return filepath.Join(hostCacheDir, "builtin") }

// SeedBuiltins makes the built-in host's cache under hostCacheDir (BuiltinDir) hold exactly the precompiled
// cache src, as links (SeedCache), and returns the digests the build recorded for it, which the built-in host
// checks before it reads a module (Config.Host.Artifacts).
func SeedBuiltins(hostCacheDir, src string) (Artifacts, error) {
	if err := SeedCache(BuiltinDir(hostCacheDir), src); err != nil {
		return nil, err
	}
	return ReadArtifacts(src)
}

// SeedCache makes the cache directory dst hold exactly the files of the precompiled cache src, as symbolic
// links: an entry that is not a link to src's file is replaced (atomically, by rename), and a file src does not
// have is removed. A host then finds the default plugins' machine code without compiling, and dst costs no
// copy (an emptyDir in a pod counts against its memory). Seeding again with the same src changes nothing, so
// processes that share dst may seed it at once. The runtime checks what it reads: wazero's cache entries carry
// its version and the machine's architecture, a snapshot's path names the wazero version and the memory limit,
// and a mismatch compiles, it never fails. src is never written.
func SeedCache(dst, src string) error {
	src, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		want[rel] = true
		if link, err := os.Readlink(target); err == nil && link == path {
			return nil
		}
		tmp := target + ".seed-" + strconv.Itoa(os.Getpid())
		_ = os.Remove(tmp)
		if err := os.Symlink(path, tmp); err != nil {
			return err
		}
		return os.Rename(tmp, target)
	})
	if err != nil {
		return err
	}
	return filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dst, path)
		if err != nil {
			return err
		}
		if !want[rel] && !strings.Contains(filepath.Base(rel), ".seed-") {
			return os.Remove(path)
		}
		return nil
	})
}
