package render

import (
	"encoding/json"
	"fmt"
)

// Per-OS settings from the MachineDeployment's operatingSystemSpec, with machine-controller's JSON names.
// Templates see them as .UbuntuConfig, .FlatcarConfig, ... exactly as in upstream OSM.
type (
	// UbuntuConfig holds Ubuntu settings.
	UbuntuConfig struct {
		DistUpgradeOnBoot bool `json:"distUpgradeOnBoot"`
	}
	// FlatcarConfig holds Flatcar settings.
	FlatcarConfig struct {
		DisableAutoUpdate   bool   `json:"disableAutoUpdate"`
		DisableLocksmithD   bool   `json:"disableLocksmithD"`
		DisableUpdateEngine bool   `json:"disableUpdateEngine"`
		ProvisioningUtility string `json:"provisioningUtility,omitempty"`
	}
	// RhelConfig holds RHEL settings, including subscription credentials.
	RhelConfig struct {
		DistUpgradeOnBoot               bool   `json:"distUpgradeOnBoot"`
		RHELSubscriptionManagerUser     string `json:"rhelSubscriptionManagerUser,omitempty"`
		RHELSubscriptionManagerPassword string `json:"rhelSubscriptionManagerPassword,omitempty"`
		RHSMOfflineToken                string `json:"rhsmOfflineToken,omitempty"`
		AttachSubscription              bool   `json:"attachSubscription"`
	}
	// RockyLinuxConfig holds Rocky Linux settings.
	RockyLinuxConfig struct {
		DistUpgradeOnBoot bool `json:"distUpgradeOnBoot"`
	}
	// AmazonLinuxConfig holds Amazon Linux settings.
	AmazonLinuxConfig struct {
		DistUpgradeOnBoot bool `json:"distUpgradeOnBoot"`
	}
)

// OSConfigs holds the settings of the machine's OS; the others stay zero, as upstream does.
type OSConfigs struct {
	UbuntuConfig      UbuntuConfig
	FlatcarConfig     FlatcarConfig
	RhelConfig        RhelConfig
	RockyLinuxConfig  RockyLinuxConfig
	AmazonLinuxConfig AmazonLinuxConfig
}

// distUpgradeOnBoot reports whether the OS asks for a package upgrade at first boot.
func (c OSConfigs) distUpgradeOnBoot() bool {
	return c.UbuntuConfig.DistUpgradeOnBoot || c.RhelConfig.DistUpgradeOnBoot ||
		c.RockyLinuxConfig.DistUpgradeOnBoot || c.AmazonLinuxConfig.DistUpgradeOnBoot
}

func parseOSConfigs(osName string, spec []byte) (OSConfigs, error) {
	var c OSConfigs
	if len(spec) == 0 || string(spec) == "null" {
		return c, nil
	}
	var into any
	switch osName {
	case "ubuntu":
		into = &c.UbuntuConfig
	case "flatcar":
		into = &c.FlatcarConfig
	case "rhel":
		into = &c.RhelConfig
	case "rockylinux":
		into = &c.RockyLinuxConfig
	case "amzn2":
		into = &c.AmazonLinuxConfig
	default:
		return c, nil
	}
	if err := json.Unmarshal(spec, into); err != nil {
		return c, fmt.Errorf("spec.template.spec.providerSpec.value.operatingSystemSpec: %w", err)
	}
	return c, nil
}
