package app_test

import (
	"os"
	"testing"

	"github.com/osmhq/osm/host/internal/hostbuild"
)

// TestMain gives the controllers the tests start a non-race osm-plugin-host under -race (hostbuild), and
// removes the osm-controller binary the tests built (buildBinary).
func TestMain(m *testing.M) {
	os.Exit(hostbuild.Main(func() int {
		defer removeControllerBinary()
		return m.Run()
	}))
}
