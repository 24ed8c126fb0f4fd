package ignition

import (
	"fmt"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_3/types"
	"k8s.io/utils/ptr"

	"github.com/osmhq/osm/sdk/abi"
)

// ModulesScriptPath and ModulesUnitName carry cloud-init's bootcmd and runcmd over to Ignition, which has no
// equivalent: the commands become a script run once by a oneshot unit.
const (
	ModulesScriptPath = "/opt/osm/run-commands.sh"
	ModulesUnitName   = "osm-run-commands.service"
)

// ModulesOutput is the script and unit standing in for bootcmd and runcmd.
type ModulesOutput struct {
	Script types.File
	Unit   types.Unit
}

// Modules converts bootcmd and runcmd into a script and a unit. Modules Ignition cannot express
// (rh_subscription, yum_repos) are an error rather than silently dropped.
func Modules(cfg *abi.NodeConfig) (*ModulesOutput, error) {
	m := cfg.Modules
	if m == nil {
		return nil, nil
	}
	if len(m.RHSubscription) > 0 || len(m.YumRepos) > 0 || m.YumRepoDir != "" {
		return nil, fmt.Errorf("modules.rh_subscription, modules.yum_repos and modules.yum_repo_dir are cloud-init only; use files or a unit with Ignition")
	}
	if len(m.BootCMD) == 0 && len(m.RunCMD) == 0 {
		return nil, nil
	}
	var script strings.Builder
	script.WriteString("#!/bin/bash\n# bootcmd and runcmd of the OperatingSystemConfig, run once at first boot.\nset -xeuo pipefail\n")
	for _, c := range m.BootCMD {
		script.WriteString(c + "\n")
	}
	for _, c := range m.RunCMD {
		script.WriteString(c + "\n")
	}
	unit := "[Unit]\nDescription=Run the bootcmd and runcmd commands of the OperatingSystemConfig\n" +
		"Wants=network-online.target\nAfter=network-online.target\n" +
		"ConditionPathExists=!/var/lib/osm/run-commands.done\n\n" +
		"[Service]\nType=oneshot\nRemainAfterExit=true\nExecStart=" + ModulesScriptPath + "\n" +
		"ExecStartPost=/bin/sh -c 'mkdir -p /var/lib/osm && touch /var/lib/osm/run-commands.done'\n\n" +
		"[Install]\nWantedBy=multi-user.target\n"
	return &ModulesOutput{
		Script: file(ModulesScriptPath, 0o755, []byte(script.String())),
		Unit:   types.Unit{Name: ModulesUnitName, Enabled: ptr.To(true), Contents: ptr.To(unit)},
	}, nil
}
