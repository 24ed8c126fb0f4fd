//go:build race

package app_test

// raceEnabled says the test binary was built with -race: as its own plugin host it would run wazero's
// compiler instrumented, several times slower than the osm-plugin-host a controller ships with.
const raceEnabled = true
