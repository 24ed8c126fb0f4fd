// Package wirejson encodes and decodes the ABI's JSON inside a plugin, several times faster than
// encoding/json there.
//
// Why it exists: the host can interrupt a plugin only because wazero compiles a check into every loop
// iteration of the guest, and Go's wasm code is loop-heavy, so a trivial loop costs ~27 ns per iteration in
// the sandbox. encoding/json walks every byte of its input at least twice through a function-pointer state
// machine (once to validate, once to decode), which made decoding a 6.6 KB render request take ~4 ms. This
// package parses in one pass, scans strings eight bytes at a time, and writes exactly the bytes
// encoding/json writes (HTML-safe escaping, sorted map keys), so output is unchanged.
//
// Semantics follow encoding/json for the kinds the ABI uses — structs with json tags (omitempty, "-"),
// strings, bools, integers, pointers, slices, []byte as base64, maps with string keys, json.RawMessage —
// including case-insensitive field matching, null handling and U+FFFD replacement of invalid UTF-8. Anything
// else (interfaces, floats, arrays, embedded structs, types with their own JSON or text methods, ",string")
// is handed to encoding/json for that value, so unusual types stay correct, just not faster. Differential
// tests and a fuzz target hold the two implementations to the same results.
package wirejson

//go:generate go run ./internal/gen -o abi_gen.go
