//go:build !race

package pluginhost

// slowdown scales the default load timeout; see race.go.
const slowdown = 1
