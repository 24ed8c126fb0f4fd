package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/osmhq/osm/sdk/runtime"
)

// Artifacts maps each file of a compilation cache that a host reads code from (wazero's machine code, the
// snapshots) to its "sha256:<hex>" digest, by slash-separated path relative to the cache directory. A
// process that runs no guest code produced them (the build's precompile, the supervisor's compile process)
// and the supervisor recorded them before any host ran: a host checks its cache against them before it
// reads its first module (verifyArtifacts), so a file replaced since never runs.
type Artifacts map[string]string

// ArtifactsFile is the manifest the build's precompile writes at the top of the precompiled cache.
const ArtifactsFile = "osm-artifacts.json"

// artifactPath reports whether rel (slash-separated, relative to a cache directory) is a file a host reads
// code from: wazero's machine code (wazero-<version>-<arch>-<os>/, nointerrupt/) and the snapshots
// (osm-snapshots/). Outside: the tenants' caches (each checked on its own), the runtime's cache-hit markers
// (empty files that only label a metric), and the files at the top (the build's stamp, the manifest).
func artifactPath(rel string) bool {
	top, rest, nested := strings.Cut(rel, "/")
	return nested && rest != "" && (strings.HasPrefix(top, "wazero-") || top == "nointerrupt" || top == "osm-snapshots")
}

// hashArtifacts returns the artifacts under dir. A symbolic link (a seeded cache's entries: SeedCache) is
// hashed as the file it names, which is what wazero reads.
func hashArtifacts(dir string) (Artifacts, error) {
	return hashWalked(walkArtifacts, dir, nil)
}

// hashWalked hashes the files walk finds under dir. A file whose stamp is still the one in stamps is not read
// again: it has the digest recorded with the stamp.
func hashWalked(walk func(string, func(rel, path string) error) error, dir string, stamps Stamps) (Artifacts, error) {
	arts := Artifacts{}
	err := walk(dir, func(rel, path string) error {
		if st, ok := stamps[rel]; ok {
			if now, err := stampOf(path); err == nil && now.same(st) {
				arts[rel] = st.Digest
				return nil
			}
		}
		sum, err := hashFile(path)
		if err != nil {
			return err
		}
		arts[rel] = sum
		return nil
	})
	return arts, err
}

// walkArtifacts calls fn with each artifact under dir.
func walkArtifacts(dir string, fn func(rel, path string) error) error {
	return walkFiles(dir, artifactPath, fn)
}

// walkFiles calls fn with each file under dir (and each symbolic link: SeedCache's entries) whose
// slash-separated path relative to dir keep accepts; a directory is entered when keep accepts a file in it.
func walkFiles(dir string, keep func(rel string) bool, fn func(rel, path string) error) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == dir {
				return fs.SkipAll
			}
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && !keep(rel+"/x") {
				return fs.SkipDir
			}
			return nil
		}
		if !keep(rel) {
			return nil
		}
		return fn(rel, path)
	})
}

// Stamp is what the kernel says of a file whose content was hashed (following a symbolic link, as wazero
// reads it): its device and inode, size, modification and change times. Rewriting the file changes its change
// time, which no unprivileged process can set back, and replacing it changes the inode or the change time;
// so a file whose stamp is unchanged holds the content that was hashed. Every host of the built-in modules
// checks the cache before it reads a module: with the stamps the supervisor took once, that check costs a
// stat per file instead of hashing this build's machine code and snapshots (~145 MiB for the default plugins,
// about 100 ms of CPU) at each host start.
type Stamp struct {
	Dev, Ino           uint64
	Size, Mtime, Ctime int64
	Digest             string
}

// Stamps maps an artifact's path (as in Artifacts) to its stamp.
type Stamps map[string]Stamp

func (a Stamp) same(b Stamp) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mtime == b.Mtime && a.Ctime == b.Ctime
}

func stampOf(path string) (Stamp, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return Stamp{}, err
	}
	return stampOfStat(&st), nil
}

func stampOfStat(st *unix.Stat_t) Stamp {
	return Stamp{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()} //nolint:unconvert // Dev is not uint64 on every architecture
}

// walkCode calls fn with each artifact under dir that this build's hosts read code from (runtime.CodeDirs):
// another build's entries beside them (another wazero version or architecture: the precompiled cache holds the
// release build's and the test binaries') are never opened by a host here, so they need no check.
func walkCode(dir string, fn func(rel, path string) error) error {
	for _, sub := range runtime.CodeDirs() {
		all := func(string) bool { return true }
		err := walkFiles(filepath.Join(dir, filepath.FromSlash(sub)), all, func(rel, path string) error {
			return fn(sub+"/"+rel, path)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// stampArtifacts hashes the artifacts under dir and returns the stamps of those that have the digest want
// records and did not change while they were hashed (the same stamp before and after).
//
// A file on a read-only file system is stamped with the digest want records without being read: the image's
// file system when the container runs with readOnlyRootFilesystem, as deploy/ runs it. No process of the
// container can change such a file (the kernel refuses every write, and a mount namespace a process may create
// cannot lift the read-only flag of a mount it inherited), so it holds what the image shipped, as the
// executable does; hashing it would check the image against itself, for ~110 ms of CPU at the first render
// (the default plugins' 144 MiB). A seeded cache's entries are links into that file system; a link pointed
// elsewhere afterwards no longer has the stamp's device and inode, and is hashed by the host that finds it.
func stampArtifacts(dir string, want Artifacts) Stamps {
	stamps := Stamps{}
	_ = walkCode(dir, func(rel, path string) error {
		if digest, ok := want[rel]; ok {
			if st, ok := readOnlyStamp(path); ok {
				st.Digest = digest
				stamps[rel] = st
				return nil
			}
		}
		before, err := stampOf(path)
		if err != nil {
			return nil
		}
		sum, err := hashFile(path)
		if err != nil || sum != want[rel] {
			return nil
		}
		if after, err := stampOf(path); err == nil && after.same(before) {
			before.Digest = sum
			stamps[rel] = before
		}
		return nil
	})
	return stamps
}

// readOnlyStamp returns the stamp of the file path names (followed if a link) when that file is on a file
// system mounted read-only. The stamp and the file system are read from one open file, so they are the same
// file's even if the link changes meanwhile.
func readOnlyStamp(path string) (Stamp, bool) {
	f, err := os.Open(path)
	if err != nil {
		return Stamp{}, false
	}
	defer func() { _ = f.Close() }()
	var fsys unix.Statfs_t
	var st unix.Stat_t
	if unix.Fstatfs(int(f.Fd()), &fsys) != nil || fsys.Flags&unix.ST_RDONLY == 0 || unix.Fstat(int(f.Fd()), &st) != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFREG {
		return Stamp{}, false
	}
	return stampOfStat(&st), true
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path) // follows a symbolic link
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// verifyArtifacts checks that every artifact under dir that this build reads code from (walkCode) is one of want, with the digest recorded for it. A
// recorded file that is missing is no mismatch: the host compiles that module in its own memory, from bytes
// whose digest it checked. The error names the first mismatched files.
func verifyArtifacts(dir string, want Artifacts, stamps Stamps) error {
	got, err := hashWalked(walkCode, dir, stamps)
	if err != nil {
		return fmt.Errorf("reading the compilation cache %s: %w", dir, err)
	}
	var bad []string
	for rel, sum := range got {
		switch w, ok := want[rel]; {
		case !ok:
			bad = append(bad, rel+" (not recorded)")
		case w != sum:
			bad = append(bad, rel+" (digest "+sum+", recorded "+w+")")
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	if len(bad) > 3 {
		bad = append(bad[:3], fmt.Sprintf("and %d more", len(bad)-3))
	}
	return fmt.Errorf("the compilation cache %s holds files that are not what was compiled: %s", dir, strings.Join(bad, "; "))
}

// ReadArtifacts reads the manifest the build's precompile wrote into the precompiled cache dir; none (a cache
// from an older build) is an empty one, which makes a host ignore every file there.
func ReadArtifacts(dir string) (Artifacts, error) {
	b, err := os.ReadFile(filepath.Join(dir, ArtifactsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Artifacts{}, nil
	}
	if err != nil {
		return nil, err
	}
	var arts Artifacts
	if err := json.Unmarshal(b, &arts); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ArtifactsFile), err)
	}
	return arts, nil
}

// writeArtifacts records what dir holds in its manifest.
func writeArtifacts(dir string) error {
	arts, err := hashArtifacts(dir)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(arts, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ArtifactsFile), append(b, '\n'), 0o644)
}

// recordPath is where the supervisor keeps the artifacts of the tenant's module with the digest: beside the
// module's cache directory, not in it, so that the module's compile process (which may write only that
// directory) cannot write it, and no host (which may write nothing) can.
func (s *Supervisor) recordPath(digest string) string {
	return s.tenantDir(digest) + ".artifacts.json"
}

// record keeps arts, which the supervisor hashed after the module's compile process ended, for later
// processes of the controller: without it each restart would compile every tenant's module again.
func (s *Supervisor) record(digest string, arts Artifacts) error {
	if s.cfg.Host.CacheDir == "" {
		return nil
	}
	b, err := json.Marshal(arts)
	if err != nil {
		return err
	}
	path := s.recordPath(digest)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".record-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// recorded returns the record of the tenant's module when its cache directory holds exactly the files
// recorded, each with its digest: a file changed, added or gone since means a compile, as without a record.
func (s *Supervisor) recorded(digest string) (Artifacts, error) {
	if s.cfg.Host.CacheDir == "" {
		return nil, fs.ErrNotExist
	}
	b, err := os.ReadFile(s.recordPath(digest))
	if err != nil {
		return nil, err
	}
	var want Artifacts
	if err := json.Unmarshal(b, &want); err != nil {
		return nil, err
	}
	got, err := hashArtifacts(s.tenantDir(digest))
	if err != nil {
		return nil, err
	}
	if len(want) == 0 || len(got) != len(want) {
		return nil, fmt.Errorf("the compilation cache of %s holds %d files, recorded %d", digest, len(got), len(want))
	}
	for rel, sum := range want {
		if got[rel] != sum {
			return nil, fmt.Errorf("the compilation cache of %s changed: %s", digest, rel)
		}
	}
	return want, nil
}
