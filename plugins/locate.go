package plugins

import (
	"bufio"
	"embed"
	"io/fs"
	"os"
	"reflect"
	"strconv"
	"strings"
	"unsafe"
)

// BuiltinFS is the embedded dist directory. Besides reading its files like any fs.FS, it says where in the
// executable file a module lies (Locate), so the plugin host can read it from there itself: the controller
// never touches a module's 4.5 MB, which would otherwise stay resident in its address space (its pages of
// the executable) or pass through its heap.
type BuiltinFS struct {
	fs.FS
}

// ReadFile, ReadDir and Stat keep the shortcuts of the embedded directory (io/fs would otherwise open files).
func (b BuiltinFS) ReadFile(name string) ([]byte, error) { return fs.ReadFile(b.FS, name) }

func (b BuiltinFS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(b.FS, name) }

func (b BuiltinFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(b.FS, name) }

// Locate returns the file that holds the embedded file name and where in it its bytes start. It reads no
// byte of the file's contents: it finds the mapping of the executable that holds them in /proc/self/maps.
// ok is false if the file is not embedded, this toolchain lays embedded files out differently, or the
// executable cannot be named (not Linux, or replaced on disk since it started); callers then read the file
// as usual. The file may change on disk after this returns; whoever reads it checks the module's digest.
func (BuiltinFS) Locate(name string) (path string, offset, length int64, ok bool) {
	s, ok := embedded(dist, "dist/"+name)
	if !ok || s == "" {
		return "", 0, 0, false
	}
	path, offset, ok = fileOffset(uintptr(unsafe.Pointer(unsafe.StringData(s))), len(s))
	return path, offset, int64(len(s)), ok
}

// fileOffset finds the file mapping of this process that holds the n bytes at addr, and their offset in
// that file.
func fileOffset(addr uintptr, n int) (string, int64, bool) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return "", 0, false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) != 6 || !strings.HasPrefix(fields[5], "/") {
			continue
		}
		start, end, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		lo, err1 := strconv.ParseUint(start, 16, 64)
		hi, err2 := strconv.ParseUint(end, 16, 64)
		off, err3 := strconv.ParseUint(fields[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || uint64(addr) < lo || uint64(addr)+uint64(n) > hi {
			continue
		}
		return fields[5], int64(off + uint64(addr) - lo), true
	}
	return "", 0, false
}

// embedded finds the contents of the file name in fsys. embed.FS keeps each file as a string in the
// executable's read-only data (a list of {name, data string, hash} the compiler writes), but only hands out
// copies of it; this reads the string itself, and reports false if the layout is not the expected one.
func embedded(fsys embed.FS, name string) (string, bool) {
	v := reflect.ValueOf(fsys)
	if v.NumField() != 1 || v.Field(0).Kind() != reflect.Pointer || v.Field(0).IsNil() {
		return "", false
	}
	files := v.Field(0).Elem()
	if files.Kind() != reflect.Slice || files.Type().Elem().Kind() != reflect.Struct || files.Type().Elem().NumField() < 2 {
		return "", false
	}
	ft := files.Type().Elem()
	if ft.Field(0).Name != "name" || ft.Field(0).Type.Kind() != reflect.String ||
		ft.Field(1).Name != "data" || ft.Field(1).Type.Kind() != reflect.String {
		return "", false
	}
	for i := range files.Len() {
		if f := files.Index(i); f.Field(0).String() == name {
			return f.Field(1).String(), true
		}
	}
	return "", false
}
