package main

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
)

// TestOneIdleTimeout: -plugin-idle-timeout is the one idle timeout of plugin hosts and modules; the
// deprecated -plugin-host-idle-timeout sets it only when given alone (its 0 kept the host running), and is
// logged whenever given. -plugin-max-loaded bounds the tenants' hosts.
func TestOneIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		want   time.Duration
		logged bool
	}{
		{nil, 500 * time.Millisecond, false},
		{[]string{"-plugin-idle-timeout=2s"}, 2 * time.Second, false},
		{[]string{"-plugin-host-idle-timeout=3s"}, 3 * time.Second, true},
		{[]string{"-plugin-host-idle-timeout=0"}, -1, true},
		{[]string{"-plugin-host-idle-timeout=3s", "-plugin-idle-timeout=2s"}, 2 * time.Second, true},
	} {
		var p pluginFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		p.register(fs, t.TempDir())
		if err := fs.Parse(append(tc.args, "-plugin-max-loaded=3")); err != nil {
			t.Fatal(err)
		}
		p.set = map[string]bool{}
		fs.Visit(func(f *flag.Flag) { p.set[f.Name] = true })
		var lines []string
		log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
		cfg, err := p.config(log)
		if err != nil {
			t.Fatal(err)
		}
		logged := strings.Contains(strings.Join(lines, "\n"), "-plugin-host-idle-timeout is deprecated")
		if cfg.IdleTimeout != tc.want || logged != tc.logged || cfg.MaxLoadedModules != 3 {
			t.Errorf("%v: idle timeout %s, deprecation logged %v, max loaded %d; want %s, %v, 3", tc.args, cfg.IdleTimeout, logged, cfg.MaxLoadedModules, tc.want, tc.logged)
		}
	}
}
