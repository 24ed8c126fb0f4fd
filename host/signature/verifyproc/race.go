//go:build race

package verifyproc

// raceAddressSpace replaces DefaultAddressSpace in a race-detector build, where a verifier is this same
// executable (tests: SelfServes) and the race runtime alone reserves about 1.7 GiB of address space at start
// and maps more shadow memory as the heap grows: under 2 GiB it cannot allocate and dies, which refuses every
// signed plugin. Release builds never use the race detector.
const raceAddressSpace = 64 << 30
