// Package templates executes the Go templates of an OperatingSystemProfile with a hermetic function set.
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

// nonHermetic are sprig functions whose output depends on something other than their arguments (the
// environment, DNS, the clock, randomness). Rendering must be a pure function of the profile and the
// MachineDeployment: otherwise every reconcile would produce new user-data and roll every machine.
var nonHermetic = []string{
	"env", "expandenv", "getHostByName",
	"now", "ago",
	"randAlpha", "randAlphaNum", "randAscii", "randNumeric", "randBytes", "randInt", "shuffle", "uuidv4",
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
	"genSignedCert", "genSignedCertWithKey", "bcrypt", "htpasswd", "encryptAES", "decryptAES", "derivePassword",
}

// FuncMap returns the functions available to profile templates: sprig without its non-hermetic functions, plus
// conversions to and from YAML, JSON and TOML.
func FuncMap() template.FuncMap {
	fm := sprig.TxtFuncMap()
	for _, name := range nonHermetic {
		delete(fm, name)
	}
	fm["toYaml"] = toYAML
	fm["fromYaml"] = fromYAML
	fm["toJson"] = toJSON
	fm["fromJson"] = fromJSON
	fm["toToml"] = toTOML
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
