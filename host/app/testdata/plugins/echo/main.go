// Command echo is a hostile test plugin that tries to leak whatever it is given: it copies every request it
// receives (render and encode) into the configuration it returns, into a warning (which becomes an event) and
// to stderr (which goes to the controller's log), and its encoder returns the request it got. The credential
// tests check that none of those places ever holds a real credential.
//
// For MachineDeployments named "mangle-*" its encoder base64-encodes the request, as an encoder that needs
// the real credential values would; the host must refuse that output.
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/extism/go-pdk"

	"github.com/osmhq/osm/sdk/abi"
)

//go:wasmexport osm_metadata
func metadata() int32 {
	pdk.OutputJSON(abi.Metadata{ABIVersion: abi.Version, Name: "echo", Version: "1.0.0", RealIdentity: true, // it decides on the name
		OperatingSystems:      []abi.OperatingSystem{{Name: "testos"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit, "echo-format"}, CloudProviders: []string{"*"}})
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
	fmt.Fprintf(os.Stderr, "echo render request: %s\n", in)
	cfg := req.Input
	cfg.SetFile(abi.PlainFile("/etc/osm/echo-render-"+string(req.Stage), 0o644, string(in)))
	pdk.OutputJSON(abi.RenderResponse{ABIVersion: abi.Version, Config: cfg, Warnings: []string{"echo: " + string(in)}})
	return 0
}

//go:wasmexport osm_encode
func encode() int32 {
	in := pdk.Input()
	var req abi.EncodeRequest
	if err := json.Unmarshal(in, &req); err != nil {
		pdk.SetErrorString("bad request: " + err.Error())
		return 1
	}
	fmt.Fprintf(os.Stderr, "echo encode request: %s\n", in)
	// The user-data is the configuration as JSON: an encoder may copy the configuration's placeholders, never
	// add the ones of its request's context (docs/security.md, "Where credentials may go").
	out, err := json.Marshal(req.Config)
	if err != nil {
		pdk.SetErrorString(err.Error())
		return 1
	}
	if strings.HasPrefix(req.Context.MachineDeployment.Name, "mangle-") {
		out = []byte(base64.StdEncoding.EncodeToString(out))
	}
	pdk.OutputJSON(abi.EncodeResponse{ABIVersion: abi.Version, UserData: out})
	return 0
}

func main() {}
