package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// Plugin adds site settings to a stage that a profile's plugin already rendered.
type Plugin struct{}

// Paths the plugin writes; an extension that runs it owns them (another extension writing them conflicts).
const (
	caPath     = "/usr/local/share/ca-certificates/osm-site-ca.crt"
	ntpPath    = "/etc/systemd/timesyncd.conf.d/50-osm-site.conf"
	sysctlPath = "/etc/sysctl.d/90-osm-site.conf"
)

var (
	sysctlKey   = regexp.MustCompile(`^[a-z0-9_.-]+(/[a-z0-9_.-]+)*$`)
	packageName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]*$`)
	hostName    = regexp.MustCompile(`^[A-Za-z0-9.:-]+$`)
)

// Metadata declares the operating systems whose trust store, time sync and package manager the plugin knows.
func (Plugin) Metadata() abi.Metadata {
	return abi.Metadata{
		Name:                  "site",
		Version:               "0.1.0",
		Description:           "Site CA, NTP servers, sysctls and packages for Ubuntu and Debian nodes",
		OperatingSystems:      []abi.OperatingSystem{{Name: "ubuntu"}, {Name: "debian"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit},
		CloudProviders:        []string{"*"},
		ConfigSchema: []abi.ConfigOption{
			{Name: "caBundle", Description: "PEM certificates the node trusts, before containerd starts"},
			{Name: "ntpServers", Type: abi.ConfigList, Description: "NTP servers for systemd-timesyncd"},
			{Name: "sysctls", Type: abi.ConfigList, Description: "key=value kernel parameters"},
			{Name: "packages", Type: abi.ConfigList, Description: "extra apt packages"},
		},
	}
}

// Render leaves the bootstrap stage alone and adds the site settings to provisioning.
func (Plugin) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	cfg := req.Input
	if req.Stage != abi.StageProvisioning {
		return &abi.RenderResponse{Config: cfg}, nil
	}
	if err := check(req.Config); err != nil {
		return nil, err
	}
	var runcmd []string
	if ca := req.Config["caBundle"]; ca != "" {
		cfg.SetFile(abi.PlainFile(caPath, 0o644, strings.TrimSpace(ca)+"\n"))
		addDropIn(&cfg, "containerd.service", abi.DropIn{Name: "10-osm-site-ca.conf", Content: "[Service]\nExecStartPre=/usr/sbin/update-ca-certificates\n"})
	}
	if servers := abi.ConfigItems(req.Config["ntpServers"]); len(servers) > 0 {
		cfg.SetFile(abi.PlainFile(ntpPath, 0o644, "[Time]\nNTP="+strings.Join(servers, " ")+"\n"))
		runcmd = append(runcmd, "systemctl try-restart systemd-timesyncd.service")
	}
	if kvs := abi.ConfigItems(req.Config["sysctls"]); len(kvs) > 0 {
		var b strings.Builder
		for _, kv := range kvs {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Fprintf(&b, "%s = %s\n", k, v)
		}
		cfg.SetFile(abi.PlainFile(sysctlPath, 0o644, b.String()))
		runcmd = append(runcmd, "sysctl --system")
	}
	if pkgs := abi.ConfigItems(req.Config["packages"]); len(pkgs) > 0 {
		runcmd = append(runcmd, "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "+strings.Join(pkgs, " "))
	}
	if len(runcmd) > 0 {
		m := cfg.EnsureModules()
		m.RunCMD = append(m.RunCMD, runcmd...)
	}
	return &abi.RenderResponse{Config: cfg}, nil
}

// Validate refuses config that would break the node or the shell line it ends up in.
func (Plugin) Validate(req *abi.ValidateRequest) (*abi.ValidateResponse, error) {
	resp := &abi.ValidateResponse{}
	if err := check(req.Config); err != nil {
		resp.Errors = append(resp.Errors, abi.FieldError{Field: "config", Message: err.Error()})
	}
	return resp, nil
}

func check(config map[string]string) error {
	if ca := strings.TrimSpace(config["caBundle"]); ca != "" && !strings.HasPrefix(ca, "-----BEGIN CERTIFICATE-----") {
		return fmt.Errorf("caBundle must be PEM certificates")
	}
	for _, s := range abi.ConfigItems(config["ntpServers"]) {
		if !hostName.MatchString(s) {
			return fmt.Errorf("ntpServers: %q is not a host name or address", s)
		}
	}
	for _, kv := range abi.ConfigItems(config["sysctls"]) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !sysctlKey.MatchString(k) || v == "" || strings.ContainsAny(v, "\n") {
			return fmt.Errorf("sysctls: %q is not key=value", kv)
		}
	}
	for _, p := range abi.ConfigItems(config["packages"]) {
		if !packageName.MatchString(p) {
			return fmt.Errorf("packages: %q is not a package name", p)
		}
	}
	return nil
}

// addDropIn adds a drop-in to the stage's unit, or a drop-in-only unit for one the OS ships.
func addDropIn(cfg *abi.NodeConfig, unit string, d abi.DropIn) {
	if u := cfg.Unit(unit); u != nil {
		u.DropIns = append(u.DropIns, d)
		return
	}
	cfg.Units = append(cfg.Units, abi.Unit{Name: unit, DropIns: []abi.DropIn{d}})
}
