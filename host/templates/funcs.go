// Package templates executes the Go templates of an OperatingSystemProfile with a hermetic function set, under
// a budget (Limits) that holds for any template.
package templates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"github.com/pelletier/go-toml/v2"
	"sigs.k8s.io/yaml"
)

// removed are the sprig functions profile templates cannot call, and why. Rendering must be a pure function of
// the profile and the MachineDeployment: otherwise every reconcile would produce new user-data and roll every
// machine, and the controller's host would leak into nodes.
var removed = map[string]string{
	"env":           "reads the controller's environment",
	"expandenv":     "reads the controller's environment",
	"getHostByName": "queries DNS",
	"now":           "reads the clock",
	"ago":           "reads the clock",

	"randAlpha": "random", "randAlphaNum": "random", "randAscii": "random", "randNumeric": "random",
	"randBytes": "random", "randInt": "random", "shuffle": "random", "uuidv4": "random",
	"genPrivateKey": "random", "genCA": "random", "genCAWithKey": "random", "genSelfSignedCert": "random",
	"genSelfSignedCertWithKey": "random", "genSignedCert": "random", "genSignedCertWithKey": "random",
	"bcrypt": "random salt", "htpasswd": "random salt", "encryptAES": "random IV",
	"decryptAES":     "secrets have no place in a profile",
	"derivePassword": "scrypt: 32 MiB and 100 ms per call",
}

// overrides replace sprig's functions and text/template's printing built-ins. The date functions are
// hermetic (dates.go); the conversions report errors instead of printing nothing; the built-ins that build
// strings are registered here so that the budget wraps them like every other function.
var overrides = map[string]any{
	"toYaml":   toYAML,
	"fromYaml": fromYAML,
	"toJson":   toJSON,
	"fromJson": fromJSON,
	"toToml":   toTOML,

	"date":           date,
	"date_in_zone":   dateInZone,
	"dateInZone":     dateInZone,
	"htmlDate":       htmlDate,
	"htmlDateInZone": htmlDateInZone,
	"toDate":         toDate,
	"mustToDate":     mustToDate,
	"durationRound":  durationRound,

	"print":    fmt.Sprint,
	"printf":   fmt.Sprintf,
	"println":  fmt.Sprintln,
	"html":     template.HTMLEscaper,
	"js":       template.JSEscaper,
	"urlquery": template.URLQueryEscaper,
}

// functions returns the functions available to profile templates, unbounded: sprig without the removed
// functions, with the overrides. Templates only ever see them wrapped by a budget (guard.go).
func functions() map[string]any {
	fm := sprig.TxtFuncMap()
	for name := range removed {
		delete(fm, name)
	}
	for name, fn := range overrides {
		fm[name] = fn
	}
	return fm
}

// toYAML marshals v to YAML without a trailing newline, so it composes with indent/nindent.
func toYAML(v any) (string, error) {
	data, err := yaml.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toYaml: %w", err)
	}
	return strings.TrimSuffix(string(data), "\n"), nil
}

func fromYAML(s string) (map[string]any, error) {
	out := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("fromYaml: %w", err)
	}
	return out, nil
}

func toJSON(v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toJson: %w", err)
	}
	return string(data), nil
}

func fromJSON(s string) (map[string]any, error) {
	out := map[string]any{}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("fromJson: %w", err)
	}
	return out, nil
}

func toTOML(v any) (string, error) {
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("toToml: %w", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}
