package runtime

import (
	"fmt"
	"os"
	"path/filepath"
)

// snapshotFormat versions the files cachedSnapshot reads: a change to what a snapshot holds or to guestEnv
// must change it, so that no host starts instances from a snapshot an older host took.
const snapshotFormat = "1"

// snapshotPath is where the module with the digest, rebuilt from its snapshot, is kept under CacheDir, or ""
// without one. The path names everything the snapshot depends on: the module, the runtime that ran its
// initialisation (wazero's version), the memory limit it ran under and the snapshot format.
func (r *Runtime) snapshotPath(digest string) string {
	if r.cfg.CacheDir == "" {
		return ""
	}
	return filepath.Join(r.cfg.CacheDir, "osm-snapshots", wazeroVersion(),
		fmt.Sprintf("%s-%d-v%s.wasm", digest[len("sha256:"):], r.cfg.memoryPages(), snapshotFormat))
}

// cachedSnapshot returns the rebuilt module a previous load kept on disk. Taking a snapshot runs the module's
// initialisation in a probe instance and decodes the module twice: a controller restarting with a warm
// cache skips all of it, and with it ~10 MiB of its peak memory. Like wazero's compiled code beside it, the
// directory is trusted: it must be private to the controller.
func (r *Runtime) cachedSnapshot(digest string) ([]byte, guestEnv, bool) {
	path := r.snapshotPath(digest)
	if path == "" {
		return nil, guestEnv{}, false
	}
	built, err := os.ReadFile(path)
	if err != nil {
		return nil, guestEnv{}, false
	}
	var env guestEnv
	if f, err := os.ReadFile(path + ".env"); err != nil {
		return nil, guestEnv{}, false
	} else if _, err := fmt.Sscanf(string(f), "ticks %d random %d\n", &env.ticks, &env.randBytes); err != nil {
		return nil, guestEnv{}, false
	}
	return built, env, true
}

// cacheSnapshot keeps a rebuilt module for the next load, best effort: the environment first, then the module
// under its final name, so that a reader never finds a module without its environment.
func (r *Runtime) cacheSnapshot(digest string, built []byte, env guestEnv) {
	path := r.snapshotPath(digest)
	if path == "" || r.cfg.ReadOnlyCache {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return
	}
	if writeAtomically(path+".env", fmt.Appendf(nil, "ticks %d random %d\n", env.ticks, env.randBytes)) != nil {
		return
	}
	_ = writeAtomically(path, built)
}

func writeAtomically(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone after the rename: only a failed write leaves it
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
