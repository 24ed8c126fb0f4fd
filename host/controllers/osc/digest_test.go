package osc

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// TestConfigDigestIsJSONMarshals: OSCs carry the digest; a controller that computed it differently would see
// every MachineDeployment drift after an upgrade.
func TestConfigDigestIsJSONMarshals(t *testing.T) {
	spec := &osmv1alpha1.OperatingSystemConfigSpec{OSName: "ubuntu", OSVersion: "24.04 <&>",
		ProvisioningConfig: osmv1alpha1.OSCConfig{Files: []osmv1alpha1.File{{Path: "/etc/a", Content: osmv1alpha1.FileContent{
			Inline: &osmv1alpha1.FileContentInline{Data: "line\nwith \"quotes\" and <html>\n"}}}}}}
	data, err := json.Marshal(*spec)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got, want := configDigest(spec), hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("configDigest = %s, json.Marshal's = %s", got, want)
	}
}
