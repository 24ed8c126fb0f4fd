package main

import (
	"fmt"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
)

// Plugin renders nodes of the fictional "exampleos". All of its logic is plain Go: it runs natively in tests
// and, unchanged, inside the controller's sandbox.
type Plugin struct{}

// Metadata tells the controller what the plugin renders for. The guest package fills in abiVersion and the
// list of exports.
func (Plugin) Metadata() abi.Metadata {
	return abi.Metadata{
		Name:                  "template",
		Version:               "0.1.0",
		Description:           "Example plugin: time sync, sysctls and the kubelet bootstrap kubeconfig for exampleos",
		OperatingSystems:      []abi.OperatingSystem{{Name: "exampleos", Versions: []string{"1.*"}}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit},
		CloudProviders:        []string{"*"},
		ConfigSchema: []abi.ConfigOption{
			{Name: "ntpServer", Description: "NTP server the node synchronises its clock with"},
			{Name: "maxMapCount", Description: "vm.max_map_count", Default: "262144"},
		},
	}
}

// exampleOS is what the bootstrap stage needs to know about exampleos: it runs cloud-init.
var exampleOS = &node.OS{Name: "exampleos", Handoff: node.CloudInitHandoff(nil)}

// Render keeps the template output and adds the exampleos specifics. Note the two rules every plugin follows:
// output is deterministic (sorted keys, no clock, no randomness) and secret placeholders are copied verbatim.
//
// The bootstrap stage is the boot contract of sdk/SPEC.md: it must fetch the provisioning configuration
// with the provisioning token, verifying TLS with the cluster CA, and hand it to the provisioning utility.
// node.BootstrapOnly does exactly that; replace it only with something plugintest.CheckBootstrap accepts.
func (Plugin) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	if err := checkConfig(req.Config); err != nil {
		return nil, err
	}
	cfg := req.Input
	if req.Stage == abi.StageBootstrap {
		own, err := node.BootstrapOnly(exampleOS, req)
		if err != nil {
			return nil, err
		}
		cfg = *node.Merge(own, &req.Input)
	}
	var warnings []string

	sysctls := map[string]string{"net.ipv4.ip_forward": "1", "vm.max_map_count": "262144"}
	if v := req.Config["maxMapCount"]; v != "" {
		sysctls["vm.max_map_count"] = v
	}
	var b strings.Builder
	for _, k := range abi.SortedKeys(sysctls) {
		fmt.Fprintf(&b, "%s = %s\n", k, sysctls[k])
	}
	cfg.SetFile(abi.PlainFile("/etc/sysctl.d/90-osm.conf", 0o644, b.String()))

	if ntp := req.Config["ntpServer"]; ntp != "" {
		cfg.SetFile(abi.PlainFile("/etc/systemd/timesyncd.conf.d/osm.conf", 0o644, "[Time]\nNTP="+ntp+"\n"))
	} else {
		warnings = append(warnings, "no ntpServer configured: nodes use the distribution's default time servers")
	}

	if req.Stage == abi.StageProvisioning && req.Context.Secrets.BootstrapToken != "" {
		cfg.SetFile(abi.PlainFile("/var/lib/kubelet/bootstrap-kubeconfig", 0o600, bootstrapKubeconfig(req.Context)))
	}
	return &abi.RenderResponse{Config: cfg, Warnings: warnings}, nil
}

// Validate runs at admission time, so a profile with a bad config is refused before any node boots.
func (Plugin) Validate(req *abi.ValidateRequest) (*abi.ValidateResponse, error) {
	resp := &abi.ValidateResponse{}
	if err := checkConfig(req.Config); err != nil {
		resp.Errors = append(resp.Errors, abi.FieldError{Field: "spec.plugin.config.ntpServer", Message: err.Error()})
	}
	if !strings.HasPrefix(req.OSVersion, "1.") {
		resp.Errors = append(resp.Errors, abi.FieldError{Field: "spec.osVersion", Message: "exampleos 1.x is the only supported version"})
	}
	return resp, nil
}

func checkConfig(config map[string]string) error {
	if ntp := config["ntpServer"]; strings.ContainsAny(ntp, " \t\n/") {
		return fmt.Errorf("config ntpServer %q is not a host name: use e.g. \"time.example.com\"", ntp)
	}
	return nil
}

// bootstrapKubeconfig embeds the bootstrap token placeholder as is: the controller swaps in the real token
// when it writes the Secret, and only if the placeholder reaches it unchanged.
func bootstrapKubeconfig(c abi.RenderContext) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: %s
    certificate-authority: /etc/kubernetes/pki/ca.crt
contexts:
- name: bootstrap
  context: {cluster: cluster, user: kubelet-bootstrap}
current-context: bootstrap
users:
- name: kubelet-bootstrap
  user:
    token: %s
`, c.Cluster.ServerURL, c.Secrets.BootstrapToken)
}
