package abi

import (
	"strings"
	"testing"
)

// TestBootContractIsOneOfTwo: metadata declares no boot contract (fetch-then-apply) or one of the two; any
// other value is refused when the plugin is loaded.
func TestBootContractIsOneOfTwo(t *testing.T) {
	for contract, ok := range map[string]bool{"": true, BootContractFetchThenApply: true, BootContractJoinFromSettings: true, "fetch-and-apply": false} {
		m := Metadata{ABIVersion: Version, Name: "p", Version: "v1.0.0", OperatingSystems: []OperatingSystem{{Name: "os"}},
			ProvisioningUtilities: []string{UtilityCloudInit}, CloudProviders: []string{"*"}, BootContract: contract}
		err := m.Validate()
		if (err == nil) != ok || err != nil && !strings.Contains(err.Error(), "bootContract") {
			t.Errorf("bootContract %q: %v", contract, err)
		}
	}
}
