//go:build race

package hostbuild

// Race says this binary was built with -race.
const Race = true
