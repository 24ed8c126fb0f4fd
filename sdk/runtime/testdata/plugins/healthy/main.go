// Command healthy is a well-behaved plugin for the runtime's tests: it echoes the template output and adds
// a file listing the plugin config, and reports a profile problem from osm_validate. It also reports what an
// earlier call left in its instance (/etc/osm/instance), and returns a file of config["outputBytes"] bytes.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
)

type plugin struct{}

// What earlier renders of this instance saw: a host that reuses instances would let them carry data from one
// MachineDeployment into the next.
var (
	renders  int
	previous string
)

func (plugin) Metadata() abi.Metadata {
	return abi.Metadata{
		Name:                  "healthy",
		Version:               "1.0.0",
		OperatingSystems:      []abi.OperatingSystem{{Name: "testos", Versions: []string{"1.*"}}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit},
		CloudProviders:        []string{"*"},
	}
}

func (plugin) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	fmt.Fprintf(os.Stderr, "rendering %s for %s\n", req.Stage, req.Context.MachineDeployment.Name)
	if msg := req.Config["fail"]; msg != "" {
		return nil, errors.New(msg)
	}
	if req.Config["panic"] != "" {
		panic(req.Config["panic"])
	}
	cfg := req.Input
	var b strings.Builder
	for _, k := range abi.SortedKeys(req.Config) {
		fmt.Fprintf(&b, "%s=%s\n", k, req.Config[k])
	}
	cfg.SetFile(abi.PlainFile("/etc/osm/config", 0o600, b.String()))
	if tok := req.Context.Secrets.BootstrapToken; tok != "" {
		cfg.SetFile(abi.PlainFile("/etc/osm/token", 0o600, tok))
	}
	cfg.SetFile(abi.PlainFile("/etc/osm/instance", 0o600, fmt.Sprintf("renders=%d previous=%q", renders, previous)))
	renders++
	previous = req.Context.MachineDeployment.Name
	if n, err := strconv.Atoi(req.Config["outputBytes"]); err == nil {
		cfg.SetFile(abi.PlainFile("/etc/osm/big", 0o600, strings.Repeat("x", n)))
	}
	return &abi.RenderResponse{Config: cfg}, nil
}

func (plugin) Validate(req *abi.ValidateRequest) (*abi.ValidateResponse, error) {
	resp := &abi.ValidateResponse{}
	if !strings.HasPrefix(req.OSVersion, "1.") {
		resp.Errors = append(resp.Errors, abi.FieldError{Field: "spec.osVersion", Message: "testos 1.x only"})
	}
	return resp, nil
}

func init() { guest.Register(plugin{}) }

func main() {}
