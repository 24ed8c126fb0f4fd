package app_test

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// The benchmark's RSS sampler counts an address space once: a process listed twice, as a child between clone
// and exec is (it runs in its parent's memory), is dropped; a separate process is kept.
func TestOwnMemoryCountsEachAddressSpaceOnce(t *testing.T) {
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	self := os.Getpid()
	got := ownMemory([]int{self, child.Process.Pid, self})
	if want := []int{self, child.Process.Pid}; !slices.Equal(got, want) {
		t.Fatalf("ownMemory = %v, want %v", got, want)
	}
}
