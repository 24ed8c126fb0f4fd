// Package oci moves OSM plugins through OCI registries: push a WebAssembly module as an artifact, resolve a
// tag to the digest that will run, pull by digest with verification, copy between registries, and save to or
// load from an OCI-layout tarball for air-gapped sites.
//
// Artifacts follow the CNCF wasm layout: an OCI image manifest whose config has media type
// application/vnd.wasm.config.v0+json and whose single layer is application/wasm (the older
// application/vnd.wasm.content.layer.v1+wasm is accepted on pull).
//
// Everything that runs is identified by digest. Pull checks the manifest against the digest it was asked for
// and the layer against the digest in the manifest, so a registry or proxy cannot substitute content; pulled
// blobs are cached on disk by digest and re-verified whenever they are read.
//
// An artifact's referrers (its signatures: Sigstore bundles, Notation envelopes) are listed and fetched within
// bounds for package signature, and copied with the artifact by Copy, Save and Load.
package oci
