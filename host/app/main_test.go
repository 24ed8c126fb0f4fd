package app_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/osmhq/osm/host/internal/hostbuild"
)

// parallelTests is how many tests marked t.Parallel run at once unless -parallel says otherwise (or
// GOMAXPROCS, the flag's default, is larger). These tests spend most of their time waiting on their own
// kube-apiserver, etcd, controller and plugin hosts rather than running: on two cores under -race, the package
// took 341 s with 4 at once and 290 s with 6 (554 s with every test sequential).
const parallelTests = 6

// TestMain gives the controllers the tests start a non-race osm-plugin-host under -race (hostbuild), runs
// parallelTests tests at once unless -parallel is given, and removes the osm-controller binary the tests
// built (buildBinary).
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(max(parallelTests, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	os.Exit(hostbuild.Main(func() int {
		defer removeControllerBinary()
		return m.Run()
	}))
}
