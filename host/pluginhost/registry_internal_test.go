package pluginhost

import (
	"errors"
	"fmt"
	"testing"
)

// TestRememberedFailuresAreBounded: however many broken modules come, the supervisor remembers at most
// maxFailures of them.
func TestRememberedFailuresAreBounded(t *testing.T) {
	s, err := New(Config{Permanent: func(error) bool { return true }, Host: HostConfig{CacheDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for i := range maxFailures + 10 {
		s.rememberFailure(Module{Digest: fmt.Sprint("sha256:", i)}, errors.New("broken"), false)
	}
	if n := len(s.failed); n != maxFailures {
		t.Errorf("%d failures remembered, bound %d", n, maxFailures)
	}
	if s.Failed(fmt.Sprint("sha256:", maxFailures+9)) == nil {
		t.Error("the latest failure was not remembered")
	}
}
