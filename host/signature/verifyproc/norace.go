//go:build !race

package verifyproc

// raceAddressSpace is zero outside race-detector builds: DefaultAddressSpace applies (see race.go).
const raceAddressSpace = 0
