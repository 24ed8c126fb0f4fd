// Command regcode is a test plugin that needs a plugin secret, as a SLES plugin needs its registration code: it
// declares the secret registration-code (configSchema type secret, required) and writes its placeholder into
// /etc/osm/regcode. Like the echo plugin it also copies every request it receives into a warning (an event)
// and to stderr (the controller's log), so the tests can check that the secret's value never reaches them.
//
// Its encoder (provisioning utility "regcode-format") returns the configuration as JSON; for MachineDeployments
// named "drop-*" it replaces the secret's placeholder first, as an encoder that mangled it would; the host
// must refuse that output.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/extism/go-pdk"

	"github.com/osmhq/osm/sdk/abi"
)

const secretName = "registration-code"

//go:wasmexport osm_metadata
func metadata() int32 {
	pdk.OutputJSON(abi.Metadata{ABIVersion: abi.Version, Name: "regcode", Version: "1.0.0",
		OperatingSystems:      []abi.OperatingSystem{{Name: "testos"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit, "regcode-format"}, CloudProviders: []string{"*"},
		ConfigSchema: []abi.ConfigOption{{Name: secretName, Type: abi.ConfigSecret, Required: true,
			Description: "The registration code, written to /etc/osm/regcode."}}})
	return 0
}

//go:wasmexport osm_render
func render() int32 {
	in := pdk.Input()
	var req abi.RenderRequest
	if err := json.Unmarshal(in, &req); err != nil {
		pdk.SetErrorString("bad request: " + err.Error())
		return 1
	}
	fmt.Fprintf(os.Stderr, "regcode render request: %s\n", in)
	code, err := req.Context.Secrets.PluginSecret(secretName)
	if err != nil {
		pdk.SetErrorString(err.Error())
		return 1
	}
	cfg := req.Input
	if req.Stage == abi.StageProvisioning {
		cfg.SetFile(abi.PlainFile("/etc/osm/regcode", 0o600, "code="+code+"\n"))
	}
	pdk.OutputJSON(abi.RenderResponse{ABIVersion: abi.Version, Config: cfg, Warnings: []string{"regcode: " + string(in)}})
	return 0
}

//go:wasmexport osm_encode
func encode() int32 {
	var req abi.EncodeRequest
	if err := json.Unmarshal(pdk.Input(), &req); err != nil {
		pdk.SetErrorString("bad request: " + err.Error())
		return 1
	}
	out, err := json.Marshal(req.Config)
	if err != nil {
		pdk.SetErrorString(err.Error())
		return 1
	}
	if strings.HasPrefix(req.Context.MachineDeployment.Name, "drop-") {
		out = []byte(strings.ReplaceAll(string(out), req.Context.Secrets.Plugin[secretName], "REDACTED"))
	}
	pdk.OutputJSON(abi.EncodeResponse{ABIVersion: abi.Version, UserData: out})
	return 0
}

func main() {}
