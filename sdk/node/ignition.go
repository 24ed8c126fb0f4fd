package node

import (
	"strings"
)

// IgnitionBoot is where an image's Ignition finds a config at the next boot and how that boot becomes a first
// boot: what IgnitionHandoff needs to know about an Ignition OS. FlatcarIgnition and FedoraCoreOSIgnition
// describe the two shapes in use; another image fills in its own.
//
// The handoff stores the fetched configuration at ConfigPath (or the path of the first Alternatives entry
// whose directory exists), touches FirstBootFlag and the bootstrap's done marker (BootstrapDone), and
// reboots. Ignition then applies the configuration as a second run on a machine that has already booted
// once, and its units need care: Ignition does not enable a unit, it writes a systemd preset
// (/etc/systemd/system-preset/20-ignition.preset), and systemd applies presets only on a boot it considers
// its first, one without an initialised /etc/machine-id. Set exactly one of ResetMachineID (the image's
// systemd then sees a first boot and applies the presets: Flatcar) and EnableUnits (the handoff installs a
// unit that enables and starts every unit the preset file enables, once, at the boot after the second run:
// Fedora CoreOS, whose machine ID must survive).
type IgnitionBoot struct {
	// Description names the config for the script's comment and log, e.g. "the OEM Ignition config".
	Description string
	// ConfigPath is where the image's Ignition reads a config at a first boot.
	ConfigPath string
	// Alternatives are {directory, path} pairs tried in order after ConfigPath: the path of the last pair
	// whose directory exists wins (Flatcar moved its OEM partition from /usr/share/oem to /oem in 2023).
	Alternatives [][2]string
	// Prepare are shell lines run before the config is stored (e.g. making a read-only /boot writable).
	Prepare []string
	// FirstBootFlag is the file whose existence makes the next boot run Ignition.
	FirstBootFlag string
	// ResetMachineID removes /etc/machine-id, so that systemd treats the next boot as its first and applies
	// the presets of the second Ignition run.
	ResetMachineID bool
	// EnableUnits installs IgnitionEnableUnit, which enables and starts the units the second Ignition run
	// presets, at the boot after it (see IgnitionEnableScript).
	EnableUnits bool
}

// FlatcarIgnition is Flatcar Container Linux: Ignition reads an OEM config (/oem/config.ign since the 2023
// releases, /usr/share/oem/config.ign before) at a boot flagged by /boot/flatcar/first_boot, and a new machine
// ID makes systemd apply Ignition's presets.
var FlatcarIgnition = IgnitionBoot{
	Description:    "the OEM Ignition config",
	ConfigPath:     "/usr/share/oem/config.ign",
	Alternatives:   [][2]string{{"/oem", "/oem/config.ign"}},
	FirstBootFlag:  "/boot/flatcar/first_boot",
	ResetMachineID: true,
}

// FedoraCoreOSIgnition is Fedora CoreOS (and the images built like it: RHEL CoreOS, CentOS Stream CoreOS):
// the initramfs copies /boot/ignition/config.ign to Ignition's user config, which Ignition prefers to the
// platform's user-data, at a boot flagged by /boot/ignition.firstboot; /boot is mounted read-only. The
// machine ID stays, so the units of the second run are enabled by IgnitionEnableUnit.
var FedoraCoreOSIgnition = IgnitionBoot{
	Description:   "Ignition's user config",
	ConfigPath:    "/boot/ignition/config.ign",
	Prepare:       []string{"mount -o remount,rw /boot"},
	FirstBootFlag: "/boot/ignition.firstboot",
	EnableUnits:   true,
}

// Paths of IgnitionBoot.EnableUnits.
const (
	// IgnitionPresetPath is the preset file Ignition writes for the units it enables or disables.
	IgnitionPresetPath = "/etc/systemd/system-preset/20-ignition.preset"
	// IgnitionEnableScriptPath enables the units of IgnitionPresetPath.
	IgnitionEnableScriptPath = "/opt/bin/osm-ignition-enable"
	// IgnitionEnableUnit runs IgnitionEnableScriptPath once, at the boot after the second Ignition run.
	IgnitionEnableUnit = "osm-ignition-enable.service"
	// IgnitionEnableDone marks that it ran.
	IgnitionEnableDone = "/var/lib/osm/ignition-enable.done"
)

// IgnitionEnableScript enables and starts every unit that Ignition's preset file enables (template units
// with their instances, as Ignition writes them: `enable echo@.service foo bar`), then removes configPath
// (the stored configuration holds credentials) when it is set. It does not wait for the units: they are
// started with --no-block, osm-setup among them.
func IgnitionEnableScript(configPath string) string {
	s := NewScript("osm-ignition-enable", "enable the units of the provisioning Ignition config, which Ignition only presets.")
	s.Line("p=" + IgnitionPresetPath)
	s.Line(`[ -f $p ] || { log "no $p: the provisioning Ignition config enabled no units"; exit 0; }`)
	s.Raw(`units=$(awk '$1 == "enable" { if (NF == 2) print $2; else for (i = 3; i <= NF; i++) { u = $2; sub(/@\./, "@" $i ".", u); print u } }' $p)
`)
	s.Line(`if [ -n "$units" ]; then`)
	s.Line(`  systemctl daemon-reload`)
	s.Line(`  systemctl enable $units`)
	s.Line(`  systemctl --no-block start $units`)
	s.Line(`  log "enabled and started:" $units`)
	s.Line(`fi`)
	if configPath != "" {
		s.Line("# The stored configuration holds credentials.")
		s.Line("mount -o remount,rw " + dir(configPath) + " 2>/dev/null || true")
		s.Line("rm -f " + configPath)
		s.Line("mount -o remount,ro " + dir(configPath) + " 2>/dev/null || true")
	}
	s.Line("mkdir -p " + dir(IgnitionEnableDone))
	s.Line("touch " + IgnitionEnableDone)
	return s.String()
}

func ignitionEnableUnitContent() string {
	return `[Unit]
Description=OSM: enable the units of the provisioning Ignition config
ConditionPathExists=` + BootstrapDone + `
ConditionPathExists=!` + IgnitionEnableDone + `
After=systemd-remount-fs.service

[Service]
Type=oneshot
RemainAfterExit=true
ExecStart=` + IgnitionEnableScriptPath + `

[Install]
WantedBy=multi-user.target
`
}

// IgnitionHandoff hands the fetched Ignition config to the image's Ignition, in the shape boot describes:
// store it, flag a first boot, mark the bootstrap done and reboot (sdk/SPEC.md §9.3). See IgnitionBoot for
// the units of the second Ignition run.
func IgnitionHandoff(boot IgnitionBoot) func(r *Request, s *Script) {
	return func(r *Request, s *Script) {
		desc := boot.Description
		if desc == "" {
			desc = "the Ignition config"
		}
		s.Section("Store it as " + desc + " and reboot into a first boot to apply it.")
		for _, l := range boot.Prepare {
			s.Line(l)
		}
		if boot.EnableUnits {
			// The unit files are written by the running system, so enabling them is real, not a preset.
			s.Line("cat >" + IgnitionEnableScriptPath + " <<'OSM_EOF'")
			s.Raw(IgnitionEnableScript(boot.ConfigPath))
			s.Line("OSM_EOF")
			s.Line("chmod 700 " + IgnitionEnableScriptPath)
			s.Line("cat >/etc/systemd/system/" + IgnitionEnableUnit + " <<'OSM_EOF'")
			s.Raw(ignitionEnableUnitContent())
			s.Line("OSM_EOF")
			// The bootstrap script runs under umask 077; systemd warns about unit files others cannot read.
			s.Line("chmod 644 /etc/systemd/system/" + IgnitionEnableUnit)
			s.Line("systemctl daemon-reload")
			s.Line("systemctl enable " + IgnitionEnableUnit)
		}
		path := boot.ConfigPath
		if path == "" {
			path = "/usr/lib/ignition/user.ign"
		}
		target := path
		if len(boot.Alternatives) > 0 {
			s.Line("t=" + path)
			for _, a := range boot.Alternatives {
				s.Line("if [ -d " + a[0] + " ]; then t=" + a[1] + "; fi")
			}
			target = "$t"
		} else {
			s.Line("mkdir -p " + dir(path))
		}
		s.Line("install -m 600 $cfg " + target)
		flag := boot.FirstBootFlag
		s.Line(strings.TrimSpace("touch " + flag + " " + BootstrapDone))
		if boot.ResetMachineID {
			s.Line("rm -f /etc/machine-id $cfg")
		} else {
			s.Line("rm -f $cfg")
		}
		s.Line(`log "rebooting to apply ` + target + `"`)
		s.Line("systemctl --no-block reboot")
	}
}

// IgnitionUnrunModules: with Ignition the host turns bootcmd and runcmd into a unit of its own
// (osm-run-commands.service, sdk/SPEC.md §10), so osm-setup runs neither.
func IgnitionUnrunModules(*Request) (bootcmd, runcmd bool) { return false, false }
