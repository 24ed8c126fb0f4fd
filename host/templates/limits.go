package templates

import (
	"fmt"
	"time"
)

// Limits bound what the templates of one stage (bootstrapConfig or provisioningConfig) may consume. A profile
// is untrusted input executed in the controller, so every resource it can make the process spend is bounded:
// time (Timeout, and Steps/WorkBytes so that the decision does not depend on how loaded the machine is), memory
// (ValueBytes, ValueDepth, OutputBytes, StageOutputBytes) and stack (CallDepth, Nesting).
//
// The defaults leave a wide margin over upstream's largest profiles (about 33 KB of YAML, the most template-heavy
// there are: a stage uses about 30 steps, 1 KB of work and 13 KB of output); validation's
// TestUpstreamProfilesHaveHeadroom renders them all with a tenth of every limit.
type Limits struct {
	// Timeout is the wall time a stage may take. It is a backstop behind the deterministic limits below, and
	// the caller's context (reconcile, admission request) can end the render sooner.
	Timeout time.Duration
	// Steps counts range iterations, template invocations and function calls.
	Steps int
	// WorkBytes counts the bytes functions take and return and the bytes printed.
	WorkBytes int64
	// CallDepth bounds nested template invocations (recursion).
	CallDepth int
	// Nesting bounds nested control structures and parenthesised pipelines in the template source.
	Nesting int
	// OutputBytes bounds the output of one template (one file or one named template).
	OutputBytes int
	// StageOutputBytes bounds the output of all templates of a stage together.
	StageOutputBytes int
	// ValueBytes bounds the estimated size of any value a function takes or builds, and of a printed value.
	ValueBytes int
	// ValueDepth bounds how deeply lists and maps nest in a value.
	ValueDepth int
	// ProductWork bounds the length of a regular expression times the length of the text it runs on: Go's
	// regular expressions run in time proportional to that product, uninterruptibly.
	ProductWork int
}

// DefaultLimits are the limits the controller, the admission webhook and `osmctl lint` all use, so that a
// profile admitted is a profile that renders.
func DefaultLimits() Limits {
	return Limits{
		Timeout:          5 * time.Second,
		Steps:            20_000,
		WorkBytes:        16 << 20,
		CallDepth:        100,
		Nesting:          100,
		OutputBytes:      1 << 20,
		StageOutputBytes: 4 << 20,
		ValueBytes:       1 << 20,
		ValueDepth:       32,
		ProductWork:      16_000_000,
	}
}

// LimitError is a template that exceeded one of the Limits. Template errors wrap it, so errors.As finds it.
type LimitError struct {
	// Limit names the limit, as in Limits ("ValueBytes").
	Limit string
	// Max is the limit's value (milliseconds for Timeout).
	Max int64
	// Detail says what exceeded it.
	Detail string
}

func (e *LimitError) Error() string {
	if e.Limit == "Timeout" {
		return fmt.Sprintf("%s: over the Timeout limit of %s", e.Detail, time.Duration(e.Max)*time.Millisecond)
	}
	return fmt.Sprintf("%s: over the %s limit of %d", e.Detail, e.Limit, e.Max)
}
