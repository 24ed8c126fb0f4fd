package app_test

import (
	"os"
	"testing"

	"github.com/osmhq/osm/host/internal/hostbuild"
)

// TestMain gives the controllers the tests start a non-race osm-plugin-host under -race (hostbuild).
func TestMain(m *testing.M) { os.Exit(hostbuild.Main(m.Run)) }
