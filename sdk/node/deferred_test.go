package node_test

import (
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/node"
)

// TestDeferredCommandsAreDeclared: a provisioning render tells the host which command modules the provisioning
// utility leaves to osm-setup and in which script, through the wire format, also when the profile has no
// commands (an extension may add some), and osm-setup runs that script whenever it is there.
func TestDeferredCommandsAreDeclared(t *testing.T) {
	resp, err := guest.Call(testPlugin(), request(abi.StageProvisioning))
	if err != nil {
		t.Fatal(err)
	}
	d := resp.DeferredCommands
	if d == nil || d.Path != node.ProvisioningCommandsPath || d.BootCMD || !d.RunCMD {
		t.Fatalf("deferred commands = %+v, want runcmd in %s", d, node.ProvisioningCommandsPath)
	}
	if resp.Config.File(node.ProvisioningCommandsPath) != nil {
		t.Errorf("a profile without commands got a commands script")
	}
	setup := resp.Config.File(node.SetupScriptPath).Content.Inline.Data
	if !strings.Contains(setup, "if [ -f "+node.ProvisioningCommandsPath+" ]; then "+node.ProvisioningCommandsPath+" ||") {
		t.Errorf("osm-setup does not run the commands script when it is there:\n%s", setup)
	}
	boot, err := guest.Call(testPlugin(), request(abi.StageBootstrap))
	if err != nil {
		t.Fatal(err)
	}
	if boot.DeferredCommands != nil {
		t.Errorf("the bootstrap stage declares deferred commands: %+v", boot.DeferredCommands)
	}
}
