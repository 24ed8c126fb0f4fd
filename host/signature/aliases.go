package signature

import "github.com/osmhq/osm/host/signature/policy"

// The policy's types, which the controller reads without this package (package policy).
type (
	Mode              = policy.Mode
	Policy            = policy.Policy
	Authority         = policy.Authority
	NotationAuthority = policy.NotationAuthority
	Keyless           = policy.Keyless
	KeyRef            = policy.KeyRef
	Rule              = policy.Rule
	// Getter returns the data of the object a KeyRef names.
	Getter = policy.Getter
)

const (
	ModeOff     = policy.ModeOff
	ModeWarn    = policy.ModeWarn
	ModeEnforce = policy.ModeEnforce
	PolicyKey   = policy.PolicyKey
)

// ParsePolicy is policy.ParsePolicy.
func ParsePolicy(data []byte) (*Policy, error) { return policy.ParsePolicy(data) }
