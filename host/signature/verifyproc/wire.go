// Package verifyproc runs plugin signature verification in a process of its own (cmd/osm-plugin-verify): the
// controller reads the policy's trust material (package policy) and fetches the artifact's signatures from the
// registry with the pull credentials (Gather), then hands both to a verifier process that holds no credential,
// opens no file or connection, and answers one request on its standard output. The cryptography (sigstore-go,
// notation-go, package signature) is linked into that process, not the controller: their package
// initialisers cost the controller 8 MiB at start and their code ~16 MiB resident at its peak (docs/measuring.md).
//
// The controller bounds the process: its time (Timeout), its memory (RLIMIT_AS, set before it reads the
// request), its request (MaxRequest) and its answer (MaxResponse). A verifier that fails, dies, overruns a
// bound or answers anything but a well-formed acceptance refuses the plugin; it never accepts one.
package verifyproc

import "github.com/osmhq/osm/host/signature/policy"

// Version is the version of the request and response; a verifier answers only its own version, so a
// controller and verifier from different builds refuse rather than misread each other.
const Version = 1

// Bounds of the exchange.
const (
	// MaxEvidence bounds the signatures gathered for one artifact (bundles and envelopes are a few KiB).
	MaxEvidence = 4 << 20
	// MaxRequest bounds a request: the evidence, base64 in JSON, and the trust material.
	MaxRequest = 16 << 20
	// MaxResponse bounds the verifier's answer; errors in it are truncated to MaxDetail.
	MaxResponse = 64 << 10
	MaxDetail   = 8 << 10
)

// Request asks whether one of the evidence's signatures verifies under the trust.
type Request struct {
	Version  int          `json:"version"`
	Trust    policy.Trust `json:"trust"`
	Evidence Evidence     `json:"evidence"`
}

// Response is the verifier's answer: exactly one of Authority (a signature verified against that authority),
// Refusal (none did: the reason and why) and Error (the trust material is unusable: nothing was verified).
type Response struct {
	Version   int      `json:"version"`
	Authority string   `json:"authority,omitempty"`
	Refusal   *Refusal `json:"refusal,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// Refusal is why no signature verified: a condition reason (SignatureMissing, SignatureInvalid) and a detail.
type Refusal struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// Truncate bounds s to MaxDetail bytes for a response.
func Truncate(s string) string {
	if len(s) <= MaxDetail {
		return s
	}
	return s[:MaxDetail] + "… (truncated)"
}
