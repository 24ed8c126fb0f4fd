// Package wirejson encodes and decodes the ABI's JSON inside plugins (package guest), several times faster
// than encoding/json there.
//
// Where it is used, and why: inside a plugin it decodes requests and encodes responses several times faster
// than encoding/json under wazero's interruption check (a 6.6 KB request took ~4 ms with encoding/json),
// though the controller's output memo makes that matter once per distinct configuration only. The
// controller and the plugin host no longer link it: they parse untrusted plugin output with encoding/json.
// Its controller use was decoding every response, each memo hit included, and measured 5% less controller
// CPU (2.6 s against 2.8 s, make bench-baseline, N=500, median of 3, 2026-11-27), inside the ±0.3 s
// run-to-run spread docs/measuring.md states; the memo now keeps decoded responses (host/plugin), so a hit
// decodes nothing. Measured after the move (make bench-baseline against the build before it, N=500, 5 rounds
// alternating, 2026-11-28, load average 13-21 from other work): controller CPU, median (rounds), ubuntu 3.6 s
// (3.4-4.0) against 3.6 s (3.3-3.7) with wirejson, five OSes 4.6 s (4.6-6.4) against 5.0 s (4.8-5.2): no cost
// beyond the spread.
//
// Semantics follow encoding/json for the kinds the ABI uses — structs with json tags (omitempty, "-"),
// strings, bools, integers, pointers, slices, []byte as base64, maps with string keys, json.RawMessage —
// including case-insensitive field matching, null handling and U+FFFD replacement of invalid UTF-8. Anything
// else (interfaces, floats, arrays, embedded structs, types with their own JSON or text methods, ",string")
// is handed to encoding/json for that value, so unusual types stay correct, just not faster. Differential
// tests and a fuzz target hold the two implementations to the same results.
package wirejson

//go:generate go run ./internal/gen -o abi_gen.go
