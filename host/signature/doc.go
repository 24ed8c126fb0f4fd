// Package signature verifies plugin images before their modules are loaded, and signs them: the supply-chain
// boundary between a registry and the plugin host.
//
// A signature is a Sigstore bundle (a DSSE envelope over an in-toto statement naming the artifact's manifest
// digest) attached to the plugin artifact as an OCI referrer in the artifact's own registry, as cosign writes
// it. It is signed with a key, or with a certificate issued under a trusted root. Verification is offline:
// public keys and trusted roots come from ConfigMaps and Secrets of the controller's namespace that the
// operator's Policy names, and nothing is fetched but the artifact's referrers.
//
// The Policy says, per profile namespace and image repository, whether signatures are checked (off, warn,
// enforce) and which authorities may have signed. The plugin manager asks a Verifier after the pull and before
// the load, so a refused module reaches neither a plugin host nor a compiler; built-in plugins are embedded in
// the controller, trusted by their digest, and never verified.
package signature
