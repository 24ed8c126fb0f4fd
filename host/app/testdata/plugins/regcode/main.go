// Command regcode is a test plugin that needs a plugin secret, as a SLES plugin needs its registration code. It is
// written like a vendor's plugin, on the SDK's guest package (so the SDK's wire codec carries the secrets'
// placeholders): it declares the secret registration-code (configSchema type secret, required) and writes its
// placeholder into /etc/osm/regcode. Like the echo plugin it also copies every request it receives into a
// warning (an event) and to stderr (the controller's log), so the tests can check that the secret's value never
// reaches them.
//
// Its encoder (provisioning utility "regcode-format") returns the configuration as JSON; for MachineDeployments
// named "drop-*" it replaces the secret's placeholder first, as an encoder that mangled it would; the host
// must refuse that output. Deciding on the name makes it declare realIdentity: it gets the real names, not the
// placeholders a plugin that only copies them gets (sdk/SPEC.md §5).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
)

const secretName = "registration-code"

type regcode struct{}

func (regcode) Metadata() abi.Metadata {
	return abi.Metadata{Name: "regcode", Version: "1.0.0", RealIdentity: true,
		OperatingSystems:      []abi.OperatingSystem{{Name: "testos"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit, "regcode-format"}, CloudProviders: []string{"*"},
		ConfigSchema: []abi.ConfigOption{{Name: secretName, Type: abi.ConfigSecret, Required: true,
			Description: "The registration code, written to /etc/osm/regcode."}}}
}

func (regcode) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "regcode render request: %s\n", in)
	code, err := req.Context.Secrets.PluginSecret(secretName)
	if err != nil {
		return nil, err
	}
	cfg := req.Input
	if req.Stage == abi.StageProvisioning {
		cfg.SetFile(abi.PlainFile("/etc/osm/regcode", 0o600, "code="+code+"\n"))
	}
	return &abi.RenderResponse{Config: cfg, Warnings: []string{"regcode: " + string(in)}}, nil
}

func (regcode) Encode(req *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	out, err := json.Marshal(req.Config)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(req.Context.MachineDeployment.Name, "drop-") {
		out = []byte(strings.ReplaceAll(string(out), req.Context.Secrets.Plugin[secretName], "REDACTED"))
	}
	return &abi.EncodeResponse{UserData: out}, nil
}

// A c-shared WebAssembly module runs package initialisers but never main, so the plugin registers in init.
func init() { guest.Register(regcode{}) }

func main() {}
