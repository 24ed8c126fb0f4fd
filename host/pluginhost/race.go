//go:build race

package pluginhost

// slowdown scales the default load timeout in a race-built binary (the tests), whose plugin host compiles
// with wazero's compiler instrumented by the race detector: several times slower.
const slowdown = 5
