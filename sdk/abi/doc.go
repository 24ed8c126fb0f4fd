// Package abi defines version 1 of the contract between the OSM controller (the host) and an OS plugin (a
// WebAssembly module). sdk/SPEC.md is the normative description; these types are its JSON.
//
// The types are plain Go with JSON tags and no dependencies, so the same package compiles into the controller,
// into a wasip1 plugin and into an author's native tests.
package abi
