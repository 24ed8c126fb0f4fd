package node

import (
	"strings"
)

// IgnitionBoot is where an image's Ignition finds a config at the next boot and how that boot becomes a first
// boot: what IgnitionHandoff needs to know about an Ignition OS, as data. FlatcarIgnition,
// FedoraCoreOSIgnition and MicroOSIgnition describe the shapes in use; another image fills in its own.
//
// The handoff remounts Writable read-write, stores the fetched configuration at ConfigPath (on the file
// system labelled ConfigLabel when set; replaced by the last Alternatives entry whose directory exists),
// sets Trigger, touches the bootstrap's done marker (BootstrapDone) and reboots. Ignition then applies the
// configuration as a second run on a machine that has already booted once, and its units need care: Ignition
// does not enable a unit, it writes a systemd preset (/etc/systemd/system-preset/20-ignition.preset), and
// systemd applies presets only on a boot it considers its first, one without an initialised /etc/machine-id.
// Set exactly one of ResetMachineID (the image's systemd then sees a first boot and applies the presets:
// Flatcar) and EnableUnits (the handoff installs a unit that enables and starts every unit the preset file
// enables, once, at the boot after the second run: Fedora CoreOS and MicroOS, whose machine ID must survive).
type IgnitionBoot struct {
	// Description names the config for the script's comment and log, e.g. "the OEM Ignition config".
	Description string
	// ConfigPath is where the image's Ignition reads a config at a first boot; relative to the root of the
	// file system labelled ConfigLabel when that is set.
	ConfigPath string
	// ConfigLabel, when set, is the label of a file system the image's initramfs reads the config from
	// (openSUSE's ignition-setup-user: label "ignition", ignition/config.ign). The handoff mounts
	// /dev/disk/by-label/<label>, writes the config and unmounts it; a machine without that file system fails
	// the bootstrap with a message naming it.
	ConfigLabel string
	// Alternatives are {directory, path} pairs that override ConfigPath where the directory exists: each such
	// pair replaces the path chosen before it, so of several the last one listed wins (Flatcar moved its OEM
	// partition from /usr/share/oem to /oem in 2023: {"/oem", "/oem/config.ign"}).
	Alternatives [][2]string
	// Writable are mount points the handoff remounts read-write (where they are mount points) before it
	// stores the config and sets the trigger: Fedora CoreOS mounts /boot read-only.
	Writable []string
	// Prepare are shell lines run before the config is stored, after Writable is remounted.
	Prepare []string
	// Trigger makes the next boot a first boot: TouchFlag, RemoveFlag or KernelArgument.
	Trigger FirstBootTrigger
	// FirstBootFlag is the older spelling of Trigger: TouchFlag(FirstBootFlag). Trigger wins when both are set.
	FirstBootFlag string
	// ResetMachineID removes /etc/machine-id, so that systemd treats the next boot as its first and applies
	// the presets of the second Ignition run.
	ResetMachineID bool
	// EnableUnits installs IgnitionEnableUnit, which enables and starts the units the second Ignition run
	// presets, at the boot after it (see IgnitionEnableScript).
	EnableUnits bool
}

// FirstBootTrigger is how the handoff makes the next boot run Ignition; build one with TouchFlag, RemoveFlag or
// KernelArgument.
type FirstBootTrigger struct {
	kind, path, variable, value string
}

// TouchFlag: the image's boot loader runs Ignition when path exists (Fedora CoreOS /boot/ignition.firstboot,
// Flatcar /boot/flatcar/first_boot); its directory is created when missing.
func TouchFlag(path string) FirstBootTrigger { return FirstBootTrigger{kind: "touch", path: path} }

// RemoveFlag: the image's boot loader runs Ignition when path does not exist, and the image creates it after a
// first boot (openSUSE MicroOS and SLE Micro: /boot/writable/firstboot_happened).
func RemoveFlag(path string) FirstBootTrigger { return FirstBootTrigger{kind: "remove", path: path} }

// KernelArgument: the image's GRUB configuration puts the GRUB environment variable variable on the kernel
// command line, and Ignition runs when it holds value (e.g. "ignition.firstboot"); the handoff sets it in
// the GRUB environment block envFile with grub2-editenv (or grub-editenv), and the image clears it after the
// first boot.
func KernelArgument(envFile, variable, value string) FirstBootTrigger {
	return FirstBootTrigger{kind: "karg", path: envFile, variable: variable, value: value}
}

// IsZero reports whether no trigger is set.
func (f FirstBootTrigger) IsZero() bool { return f.kind == "" }

// String describes the trigger for logs and docs.
func (f FirstBootTrigger) String() string {
	switch f.kind {
	case "touch":
		return "create " + f.path
	case "remove":
		return "remove " + f.path
	case "karg":
		return "set " + f.variable + "=" + f.value + " in " + f.path
	}
	return "none"
}

// shell writes the trigger's lines.
func (f FirstBootTrigger) shell(s *Script) {
	switch f.kind {
	case "touch":
		s.Line("mkdir -p " + dir(f.path))
		s.Line("touch " + f.path)
	case "remove":
		s.Line("rm -f " + f.path)
	case "karg":
		s.Line(`e=$(command -v grub2-editenv || command -v grub-editenv || true)`)
		s.Line(`[ -n "$e" ] || { log "neither grub2-editenv nor grub-editenv: cannot set the first-boot kernel argument"; exit 1; }`)
		s.Line(`"$e" ` + f.path + " set " + Quote(f.variable+"="+f.value))
	}
}

// FlatcarIgnition is Flatcar Container Linux: Ignition reads an OEM config (/oem/config.ign since the 2023
// releases, /usr/share/oem/config.ign before) at a boot flagged by /boot/flatcar/first_boot, and a new machine
// ID makes systemd apply Ignition's presets.
var FlatcarIgnition = IgnitionBoot{
	Description:    "the OEM Ignition config",
	ConfigPath:     "/usr/share/oem/config.ign",
	Alternatives:   [][2]string{{"/oem", "/oem/config.ign"}},
	Trigger:        TouchFlag("/boot/flatcar/first_boot"),
	ResetMachineID: true,
}

// FedoraCoreOSIgnition is Fedora CoreOS (and the images built like it: RHEL CoreOS, CentOS Stream CoreOS):
// the initramfs copies /boot/ignition/config.ign to Ignition's user config, which Ignition prefers to the
// platform's user-data, at a boot flagged by /boot/ignition.firstboot; /boot is mounted read-only. The
// machine ID stays, so the units of the second run are enabled by IgnitionEnableUnit.
var FedoraCoreOSIgnition = IgnitionBoot{
	Description: "Ignition's user config",
	ConfigPath:  "/boot/ignition/config.ign",
	Writable:    []string{"/boot"},
	Trigger:     TouchFlag("/boot/ignition.firstboot"),
	EnableUnits: true,
}

// MicroOSIgnition is openSUSE MicroOS and SLE Micro: GRUB adds ignition.firstboot to the kernel command line
// while /boot/writable/firstboot_happened is missing (the image creates it after a first boot), and the
// initramfs (ignition-setup-user) takes the user config from ignition/config.ign on the file system labelled
// "ignition" in preference to the platform's user-data. The root file system is a read-only snapshot; the
// machine ID stays, so the units of the second run are enabled by IgnitionEnableUnit.
var MicroOSIgnition = IgnitionBoot{
	Description: "the user config on the ignition file system",
	ConfigPath:  "ignition/config.ign",
	ConfigLabel: "ignition",
	Writable:    []string{"/boot/writable"},
	Trigger:     RemoveFlag("/boot/writable/firstboot_happened"),
	EnableUnits: true,
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
	return ignitionEnableScript(IgnitionBoot{ConfigPath: configPath})
}

// ignitionEnableScript is IgnitionEnableScript for boot, which removes the stored config from the labelled
// file system of boot.ConfigLabel too.
func ignitionEnableScript(boot IgnitionBoot) string {
	configPath := boot.ConfigPath
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
	if boot.ConfigLabel != "" {
		s.Line("# The stored configuration holds credentials.")
		s.Line("m=/run/osm/ignition-label")
		s.Line("mkdir -p $m")
		s.Line("if mount /dev/disk/by-label/" + boot.ConfigLabel + " $m; then rm -f $m/" + strings.TrimPrefix(configPath, "/") + "; umount $m; fi")
	} else if configPath != "" {
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
		if boot.EnableUnits {
			// The unit files are written by the running system, so enabling them is real, not a preset.
			s.Line("cat >" + IgnitionEnableScriptPath + " <<'OSM_EOF'")
			s.Raw(ignitionEnableScript(boot))
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
		for _, m := range boot.Writable {
			s.Line("if mountpoint -q " + m + "; then mount -o remount,rw " + m + "; fi")
		}
		for _, l := range boot.Prepare {
			s.Line(l)
		}
		target := storeConfig(boot, s)
		trigger := boot.Trigger
		if trigger.IsZero() && boot.FirstBootFlag != "" {
			trigger = TouchFlag(boot.FirstBootFlag)
		}
		s.Line("# First boot: " + trigger.String() + ".")
		trigger.shell(s)
		s.Line("touch " + BootstrapDone)
		if boot.ResetMachineID {
			s.Line("rm -f /etc/machine-id $cfg")
		} else {
			s.Line("rm -f $cfg")
		}
		s.Line(`log "rebooting to apply ` + target + ` (first boot: ` + trigger.String() + `)"`)
		s.Line("systemctl --no-block reboot")
	}
}

// storeConfig writes the lines that store $cfg where boot's Ignition reads it and returns that path for the log.
func storeConfig(boot IgnitionBoot, s *Script) string {
	path := boot.ConfigPath
	if path == "" {
		path = "/usr/lib/ignition/user.ign"
	}
	if boot.ConfigLabel != "" {
		dev := "/dev/disk/by-label/" + boot.ConfigLabel
		s.Line(`[ -e ` + dev + ` ] || { log "no file system labelled ` + boot.ConfigLabel + ` (` + dev + `): the image reads Ignition's user config from there"; exit 1; }`)
		s.Line("m=/run/osm/ignition-label")
		s.Line("mkdir -p $m")
		s.Line("mount " + dev + " $m")
		s.Line("mkdir -p $m/" + dir(strings.TrimPrefix(path, "/")))
		s.Line("install -m 600 $cfg $m/" + strings.TrimPrefix(path, "/"))
		s.Line("umount $m")
		return boot.ConfigLabel + ":" + path
	}
	if len(boot.Alternatives) == 0 {
		s.Line("mkdir -p " + dir(path))
		s.Line("install -m 600 $cfg " + path)
		return path
	}
	s.Line("t=" + path)
	for _, a := range boot.Alternatives {
		s.Line("if [ -d " + a[0] + " ]; then t=" + a[1] + "; fi")
	}
	s.Line("install -m 600 $cfg $t")
	return "$t"
}

// IgnitionUnrunModules: with Ignition the host turns bootcmd and runcmd into a unit of its own
// (osm-run-commands.service, sdk/SPEC.md §10), so osm-setup runs neither.
func IgnitionUnrunModules(*Request) (bootcmd, runcmd bool) { return false, false }
