package policy

import "fmt"

// Error is a module refused by the verification policy. Its Reason is the condition reason
// (ReasonSignatureMissing or ReasonSignatureInvalid, or ReasonPluginPullFailed when the registry could not
// list the signatures); the message names the image, the policy and the rule.
type Error struct {
	Reason string
	Image  string
	// Policy is "namespace/name" of the policy ConfigMap, or where else the policy came from.
	Policy string
	Rule   string
	Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("plugin %s refused by the plugin verification policy %s (%s): %s", e.Image, e.Policy, e.Rule, e.Detail)
}
