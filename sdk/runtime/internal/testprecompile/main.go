// Command testprecompile fills the compilation cache that package runtime's tests share with the machine code
// of their test plugins. The tests run it, built without -race, before they start under -race (see
// main_test.go): wazero's compiler instrumented by the race detector took ~50 s per test plugin on a two-core
// machine, and a cold `go test -race` spent 317 of its 550 s compiling six of them in one test. The code it
// writes is the same the tests would write: what is missing or cannot be used, a test compiles itself.
//
//	testprecompile <cache dir> <plugin source dir>...
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/osmhq/osm/sdk/plugintest"
	"github.com/osmhq/osm/sdk/runtime"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: testprecompile <cache dir> <plugin source dir>...")
		os.Exit(2)
	}
	if err := precompile(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// precompile builds each plugin and loads it once into a Runtime over cacheDir, two at a time (the runtime's
// compile lanes): once as the tests load it by default, from a snapshot, and once with NoSnapshot, which
// compiles the original module. A module that compiles but fails to load (a test plugin of the wrong ABI) has
// left its machine code in the cache all the same, so only build and compile errors count.
func precompile(cacheDir string, dirs []string) error {
	var errs []error
	for _, noSnapshot := range []bool{false, true} {
		rt, err := runtime.New(runtime.Config{CacheDir: cacheDir, NoSnapshot: noSnapshot})
		if err != nil {
			return err
		}
		loaded := make([]error, len(dirs))
		var wg sync.WaitGroup
		for i, dir := range dirs {
			wg.Go(func() { loaded[i] = load(rt, dir) })
		}
		wg.Wait()
		errs = append(errs, loaded...)
		errs = append(errs, rt.Close(context.Background()))
	}
	return errors.Join(errs...)
}

func load(rt *runtime.Runtime, dir string) error {
	path, err := plugintest.BuildWasm(dir)
	if err != nil {
		return err
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	name := filepath.Base(dir)
	m, err := rt.Load(context.Background(), name, wasm)
	if err != nil {
		if runtime.ReasonOf(err) == runtime.ReasonInvalidModule {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	return m.Close(context.Background())
}
