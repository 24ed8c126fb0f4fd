// Package sdk is the root of the OSM plugin SDK module. Plugins use its packages: abi (the wire types),
// guest (exports), node (the Linux node kit) and plugintest (the test harness); see README.md and SPEC.md.
//
// The package itself only carries the module's go.mod and go.sum, so that tools such as `osmctl plugin init`
// write plugin modules whose dependency graph and checksums match the SDK they were built with.
package sdk

import _ "embed"

// GoMod is the SDK module's go.mod.
//
//go:embed go.mod
var GoMod []byte

// GoSum is the SDK module's go.sum.
//
//go:embed go.sum
var GoSum []byte
