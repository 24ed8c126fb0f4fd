// Package wirejson encodes and decodes the ABI's JSON, in plugins and in the controller, several times faster than
// encoding/json there.
//
// Why it is kept (measured at the controller level, make bench-baseline, N=500, median of 3, 2026-11-27): the
// controller decodes every plugin response with it (runtime.DecodeOutput), including each of the output
// memo's hits, one per stage and MachineDeployment; decoding them with encoding/json instead cost 5% more
// controller CPU (2.8 s against 2.6 s). Inside a plugin it also decodes requests and encodes responses
// several times faster than encoding/json under wazero's interruption check (a 6.6 KB request took ~4 ms
// with encoding/json), though the memo makes that matter once per distinct configuration only.
//
// Semantics follow encoding/json for the kinds the ABI uses — structs with json tags (omitempty, "-"),
// strings, bools, integers, pointers, slices, []byte as base64, maps with string keys, json.RawMessage —
// including case-insensitive field matching, null handling and U+FFFD replacement of invalid UTF-8. Anything
// else (interfaces, floats, arrays, embedded structs, types with their own JSON or text methods, ",string")
// is handed to encoding/json for that value, so unusual types stay correct, just not faster. Differential
// tests and a fuzz target hold the two implementations to the same results.
package wirejson

//go:generate go run ./internal/gen -o abi_gen.go
