package wirejson

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// TestGeneratedCodeIsCurrent fails when a type in package abi changed without `go generate`.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	want, err := exec.Command("go", "run", "./internal/gen").Output()
	if err != nil {
		t.Fatalf("running the generator: %v", err)
	}
	got, err := os.ReadFile("abi_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("abi_gen.go is stale: run `go generate ./...` in the sdk module")
	}
}
