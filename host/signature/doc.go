// Package signature verifies plugin images before their modules are loaded, and signs them: the supply-chain
// boundary between a registry and the plugin host.
//
// Signatures live in the artifact's own registry: Sigstore bundles (a DSSE envelope over an in-toto statement
// naming the artifact's manifest digest, signed with a key or a certificate under a trusted root) and Notation
// envelopes, both attached as OCI referrers, and cosign's older simple-signing layout under the tag
// "sha256-<hex>.sig" (key signatures). Verification is offline: public keys, trusted roots and Notation CA
// certificates come from ConfigMaps and Secrets of the controller's namespace that the operator's Policy names,
// and nothing is fetched but the artifact's signatures.
//
// The Policy says, per profile namespace and image repository, whether signatures are checked (off, warn,
// enforce) and which authorities may have signed. The plugin manager asks a Verifier after the pull and before
// the load, so a refused module reaches neither a plugin host nor a compiler; built-in plugins are embedded in
// the controller, trusted by their digest, and never verified.
package signature
