package pluginhost

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
)

// restrictWrites makes the file system read-only for this process, but for dir (its own compilation cache;
// "" for none), with Landlock: from here on, the kernel refuses every write, create, rename or removal
// elsewhere, whatever the guest does, and the restriction cannot be lifted. Descriptors already open (the
// pipes to the supervisor) are not affected. A host of a tenant's module writes only its module's cache, the
// built-in host only the built-ins': no process that runs one module's code can replace another module's
// compiled code. Where the kernel has no Landlock (before Linux 5.13, or disabled), BestEffort restricts
// nothing and the cache directories are protected by their ownership alone.
func restrictWrites(dir string) error {
	rules := []landlock.Rule{landlock.RODirs("/")}
	if dir != "" {
		rules = append(rules, landlock.RWDirs(dir))
	}
	if err := landlock.V7.BestEffort().RestrictPaths(rules...); err != nil {
		return fmt.Errorf("restricting the plugin host's writes with Landlock: %w", err)
	}
	return nil
}
