package node

import (
	"fmt"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// FetchedConfigPath is where the bootstrap stores the fetched configuration before handing it over. It is on
// tmpfs: the configuration holds credentials and has no business on disk until the handoff puts it where the
// provisioning utility reads it.
const FetchedConfigPath = "/run/osm/provisioning.cfg"

// Bootstrap returns the plugin's bootstrap configuration: the cluster CA and a script with a unit that
// fetches the provisioning Secret with the provisioning token and hands it to the provisioning utility. It
// needs nothing beyond what every supported image ships (bash, curl, coreutils, grep, sed), so it works
// before any package is installed, and it stays a few KiB, far below the user-data limits of the providers.
func Bootstrap(r *Request) (*abi.NodeConfig, error) {
	if r.OS.Handoff == nil {
		return nil, fmt.Errorf("plugin bug: OS %q has no Handoff, so the bootstrap could not apply the configuration it fetches; use e.g. node.CloudInitHandoff(nil)", r.OS.Name)
	}
	token := r.Ctx.Secrets.ProvisioningToken
	if token == "" {
		return nil, fmt.Errorf("the render context has no provisioning token placeholder (context.secrets.provisioningToken); the bootstrap cannot fetch the provisioning configuration without it")
	}
	cfg := &abi.NodeConfig{Files: []abi.File{abi.PlainFile(CACertPath, 0o644, withNewline(r.Ctx.Cluster.CACert))}}

	s := NewScript("osm-bootstrap", "fetch this machine's provisioning configuration and apply it.")
	s.Line("umask 077")
	s.Line("mkdir -p /run/osm /var/lib/osm")
	if p := r.Ctx.Proxy; p.HTTPProxy != "" {
		s.Line("p=" + Quote(p.HTTPProxy) + " n=" + Quote(p.NoProxy))
		s.Line("export HTTP_PROXY=$p http_proxy=$p HTTPS_PROXY=$p https_proxy=$p NO_PROXY=$n no_proxy=$n")
	}
	if r.StaticNetwork() {
		if r.OS.Network == nil {
			return nil, fmt.Errorf("the MachineDeployment asks for a static network configuration (providerSpec.value.network), which plugin %s does not support: use DHCP", r.OS.Name)
		}
		s.Section("Static network configuration from the MachineDeployment: the fetch below needs it.")
		if err := r.OS.Network(r, cfg, s); err != nil {
			return nil, err
		}
	}
	if r.OS.BootstrapPrepare != nil {
		r.OS.BootstrapPrepare(r, cfg, s)
	}
	FetchProvisioningConfig(r, s)
	reportFetched(r, s)
	r.OS.Handoff(r, s)

	// The script travels gzipped: it is most of the bootstrap, and the bootstrap is user-data with a provider
	// size limit. Its content stays plain text, so the host substitutes the token placeholder before the
	// encoder compresses it, and the OperatingSystemConfig shows it readable.
	script := abi.PlainFile(BootstrapScriptPath, 0o700, s.String())
	script.Content.Inline.Encoding = "gzip"
	cfg.Files = append(cfg.Files, script)
	// Type=exec, not oneshot: cloud-init starts the unit from runcmd and must not wait for it, because the
	// script waits for that cloud-init run to end before it starts another one.
	cfg.Units = append(cfg.Units, unit(BootstrapUnit, true, `[Unit]
Description=OSM bootstrap
Wants=network-online.target
After=network-online.target
ConditionPathExists=!`+BootstrapDone+`
StartLimitIntervalSec=0
[Service]
Type=exec
ExecStart=`+BootstrapScriptPath+`
Restart=on-failure
RestartSec=30
[Install]
WantedBy=multi-user.target
`))
	return cfg, nil
}

// FetchProvisioningConfig writes the fetch of the provisioning Secret to FetchedConfigPath. The key is cut out of the
// Secret's JSON with grep and sed, which works on the compact and the pretty-printed form the API server
// returns (it pretty-prints for curl) because base64 never contains a quote. Errors that retrying cannot fix
// (a refused token, a certificate not signed by the cluster CA) end the script with a message in the
// journal; the unit's Restart= tries again later in case the cause is fixed. Anything else is retried with
// exponential backoff.
func FetchProvisioningConfig(r *Request, s *Script) {
	sec := r.Ctx.Cluster.ProvisioningSecret
	url := strings.TrimRight(r.Ctx.Cluster.ServerURL, "/") + "/api/v1/namespaces/" + sec.Namespace + "/secrets/" + sec.Name
	pattern := `"` + quoteBRE(sec.Key) + `": *"[^"]*"`
	s.Section("Fetch the provisioning Secret; TLS is verified with the cluster CA.")
	s.Line("url=" + Quote(url))
	// The token placeholder is copied verbatim (the host substitutes the real token when it writes the Secret)
	// and reaches curl through a file descriptor, so it never appears in a process list.
	s.Line("tok=" + Quote(r.Ctx.Secrets.ProvisioningToken))
	s.Line("r=/run/osm/secret.json d=2")
	// curl exit codes 51, 53, 54, 58, 59, 60, 66, 77, 80, 82, 83, 90 and 91 are certificate and TLS setup
	// errors; 35 (handshake failed) is not among them because a half-started API server causes it too.
	s.Raw(`until
  rc=0
  code=$(curl -sS --cacert ` + CACertPath + ` -H @<(printf 'Authorization: Bearer %s\n' "$tok") --connect-timeout 10 -m 120 -o $r -w '%{http_code}' "$url") || rc=$?
  [ "$rc/$code" = 0/200 ]
do
  case $rc/$code in
  0/401 | 0/403) log "$url: token refused (HTTP $code), it is invalid or expired; delete the Machine to get a new one"; exit 1 ;;
  5[13489]/* | 6[06]/* | 77/* | 8[023]/* | 9[01]/*) log "$url: TLS verification with ` + CACertPath + ` failed (curl exit $rc)"; exit 1 ;;
  esac
  log "$url: curl exit $rc, HTTP $code; retrying in ${d}s"
  sleep $d
  d=$((d < 32 ? d * 2 : 60))
done
`)
	s.Line("data=$(grep -o " + Quote(pattern) + ` $r | tail -n 1 | sed 's/.*: *"//;s/"$//') || true`)
	s.Line("rm -f $r")
	s.Line(`[ -n "$data" ] || { log "the Secret has no key ` + sec.Key + `"; exit 1; }`)
	s.Line("cfg=" + FetchedConfigPath)
	s.Line(`printf %s "$data" | base64 -d >$cfg`)
}

// CloudInitHandoff applies the fetched cloud-config with the image's cloud-init, the way upstream OSM does:
// wait for the first boot's run to finish, clean cloud-init's state and run its init stage with the
// configuration as an extra config file (that stage writes the files and units and runs bootcmd; osm-setup
// does the rest). preInit runs between the clean and the init run (provider quirks).
//
// Unlike upstream, it then runs a final stage with no modules: that stage is what records a run's result, and
// without it `cloud-init status` says "running" forever and `cloud-init status --wait` never returns.
func CloudInitHandoff(preInit func(r *Request, s *Script)) func(r *Request, s *Script) {
	return func(r *Request, s *Script) {
		s.Section("Apply it with cloud-init once the first boot's run is over, keeping its network and SSH host keys.")
		s.Line("cloud-init status --wait >/dev/null 2>&1 || true")
		s.Line("f=" + cloudInitProvisioningCfg)
		s.Line("install -m 600 $cfg $f")
		s.Line(`printf 'network: {config: disabled}\nssh_deletekeys: false\ncloud_final_modules: []\n' >/etc/cloud/cloud.cfg.d/98-osm.cfg`)
		s.Line("cloud-init clean")
		if preInit != nil {
			preInit(r, s)
		}
		s.Line("# cloud-init 24.1 moved --file behind the subcommand.")
		s.Line(`v=$(cloud-init --version 2>&1 | awk '{print $NF}')`)
		s.Line(`if [ "$(printf '24.1\n%s\n' "$v" | sort -V | head -n 1)" = 24.1 ]; then set -- init --file $f; else set -- --file $f init; fi`)
		s.Line(`cloud-init "$@" || log "cloud-init exit $?"`)
		s.Line(`cloud-init modules --mode final || log "cloud-init final exit $?"`)
		s.Line("touch /etc/cloud/cloud-init.disabled " + BootstrapDone)
		s.Line("systemctl daemon-reload")
		s.Line("systemctl start --no-block " + SetupUnit)
	}
}

// CloudInitUnrunModules: the cloud-init init stage runs bootcmd but not runcmd (a config-stage module).
func CloudInitUnrunModules(*Request) (bootcmd, runcmd bool) { return false, true }

func withNewline(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

func unit(name string, enable bool, content string) abi.Unit {
	u := abi.Unit{Name: name, Content: &content}
	if enable {
		u.Enable = &enable
	}
	return u
}

func mask(name string) abi.Unit {
	t := true
	return abi.Unit{Name: name, Mask: &t}
}

// ProxyVars are the proxy environment variables for ctx.Proxy, upper and lower case because tools disagree
// on which they read.
func ProxyVars(p abi.Proxy) [][2]string {
	var out [][2]string
	if p.HTTPProxy != "" {
		out = append(out, [2]string{"HTTP_PROXY", p.HTTPProxy}, [2]string{"http_proxy", p.HTTPProxy},
			[2]string{"HTTPS_PROXY", p.HTTPProxy}, [2]string{"https_proxy", p.HTTPProxy})
	}
	if p.NoProxy != "" && p.HTTPProxy != "" {
		out = append(out, [2]string{"NO_PROXY", p.NoProxy}, [2]string{"no_proxy", p.NoProxy})
	}
	return out
}

// quoteBRE escapes s for a grep basic regular expression. Secret keys are made of [-._a-zA-Z0-9], so only the
// dot is special, but the others are escaped as well in case a host sends something else.
func quoteBRE(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`.[]*^$\\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// BootstrapOnly renders the bootstrap stage for os from a bare render request, for plugins that use the kit
// for nothing else (the SDK's template does): it checks what the stage needs (API server URL, cluster CA,
// provisioning Secret, provisioning token) but not the plugin config, which the bootstrap does not read, and
// returns Bootstrap's configuration. os needs Name and Handoff; the other hooks are optional.
func BootstrapOnly(os *OS, req *abi.RenderRequest) (*abi.NodeConfig, error) {
	bare := *req
	bare.Config = nil
	r, err := NewRequest(&OS{Name: os.Name, Network: os.Network, Handoff: os.Handoff, BootstrapPrepare: os.BootstrapPrepare}, &bare)
	if err != nil {
		return nil, err
	}
	r.OS = os
	return Bootstrap(r)
}
