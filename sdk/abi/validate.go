package abi

import (
	"fmt"
	"strings"
)

// Validate checks the parts of a rendered configuration the host relies on when it stores and encodes it: every
// file has an absolute path and inline content, every unit has a name, and neither paths nor unit names repeat
// (the encoders would silently keep only one of them). It returns all problems at once, joined in one line.
func (c *NodeConfig) Validate() error {
	var problems []string
	paths := make(map[string]bool, len(c.Files))
	for i, f := range c.Files {
		switch {
		case f.Path == "":
			problems = append(problems, fmt.Sprintf("files[%d]: path is empty", i))
		case !strings.HasPrefix(f.Path, "/"):
			problems = append(problems, fmt.Sprintf("files[%d]: path %q is not absolute", i, f.Path))
		case paths[f.Path]:
			problems = append(problems, fmt.Sprintf("files[%d]: path %q appears more than once", i, f.Path))
		}
		paths[f.Path] = true
		if f.Content.Inline == nil {
			problems = append(problems, fmt.Sprintf("files[%d]: content.inline is missing", i))
		}
	}
	names := make(map[string]bool, len(c.Units))
	for i, u := range c.Units {
		switch {
		case u.Name == "":
			problems = append(problems, fmt.Sprintf("units[%d]: name is empty", i))
		case names[u.Name]:
			problems = append(problems, fmt.Sprintf("units[%d]: unit %q appears more than once", i, u.Name))
		}
		names[u.Name] = true
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid node configuration: %s", strings.Join(problems, "; "))
	}
	return nil
}

// CheckEnvelope checks the abiVersion of a request or response envelope. Unlike CheckVersion it names the
// envelope, because it runs on every call rather than once at load time.
func CheckEnvelope(what, v string) error {
	if v == "" {
		return fmt.Errorf("%s has no abiVersion (want %s)", what, Version)
	}
	if Major(v) != Version {
		return fmt.Errorf("%s has abiVersion %q, want %s", what, v, Version)
	}
	return nil
}

// Check validates a render response the way the host does when it receives one.
func (r *RenderResponse) Check() error {
	if err := CheckEnvelope("render response", r.ABIVersion); err != nil {
		return err
	}
	return r.Config.Validate()
}

// Check validates a validate response the way the host does when it receives one.
func (r *ValidateResponse) Check() error {
	return CheckEnvelope("validate response", r.ABIVersion)
}

// Check validates an encode response the way the host does when it receives one.
func (r *EncodeResponse) Check() error {
	if err := CheckEnvelope("encode response", r.ABIVersion); err != nil {
		return err
	}
	if len(r.UserData) == 0 {
		return fmt.Errorf("encode response has no userData")
	}
	return nil
}
