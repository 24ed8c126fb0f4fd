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

// Bootstrap returns the plugin's bootstrap configuration: the cluster CA, the provisioning token (as an HTTP
// header file), and a script with a unit that fetches the provisioning Secret and hands it to the
// provisioning utility. It needs nothing beyond what every supported image ships (bash, curl, coreutils,
// grep, sed), so it works before any package is installed, and it stays a few KiB, far below the user-data
// limits of the providers.
func Bootstrap(r *Request) (*abi.NodeConfig, error) {
	token := r.Ctx.Secrets.ProvisioningToken
	if token == "" {
		return nil, fmt.Errorf("the render context has no provisioning token placeholder (context.secrets.provisioningToken); the bootstrap cannot fetch the provisioning configuration without it")
	}
	cfg := &abi.NodeConfig{Files: []abi.File{
		abi.PlainFile(CACertPath, 644, withNewline(r.Ctx.Cluster.CACert)),
		// The placeholder is copied verbatim: the host substitutes the real token when it writes the Secret.
		abi.PlainFile(ProvisioningAuthPath, 600, "Authorization: Bearer "+token+"\n"),
	}}

	s := NewScript("osm-bootstrap", "fetch this machine's provisioning configuration from the API server and apply it.")
	s.Line("umask 077")
	s.Line("mkdir -p /run/osm /var/lib/osm")
	if proxy := proxyVars(r.Ctx.Proxy); len(proxy) > 0 {
		s.Section("Proxy settings of the controller (-node-http-proxy, -node-no-proxy).")
		for _, kv := range proxy {
			s.Line("export " + kv[0] + "=" + Quote(kv[1]))
		}
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
	fetchScript(r, s)
	r.OS.Handoff(r, s)

	cfg.Files = append(cfg.Files, abi.PlainFile(BootstrapScriptPath, 700, s.String()))
	cfg.Units = append(cfg.Units, unit(BootstrapUnit, true, `[Unit]
Description=OSM: fetch and apply this machine's provisioning configuration
Wants=network-online.target
After=network-online.target
ConditionPathExists=!`+BootstrapDone+`
StartLimitIntervalSec=0

[Service]
# exec, not oneshot: cloud-init starts this unit from runcmd, and the script waits for that cloud-init run
# to finish before it starts another one.
Type=exec
ExecStart=`+BootstrapScriptPath+`
Restart=on-failure
RestartSec=30

[Install]
WantedBy=multi-user.target
`))
	return cfg, nil
}

// fetchScript writes the fetch of the provisioning Secret to FetchedConfigPath. The key is cut out of the
// Secret's JSON with grep and sed, which works on the compact and the pretty-printed form the API server
// returns (it pretty-prints for curl) because base64 never contains a quote. Errors that retrying cannot fix
// (a refused token, a certificate not signed by the cluster CA) end the script with a message in the
// journal; the unit's Restart= tries again later in case the cause is fixed. Anything else is retried with
// exponential backoff.
func fetchScript(r *Request, s *Script) {
	sec := r.Ctx.Cluster.ProvisioningSecret
	url := strings.TrimRight(r.Ctx.Cluster.ServerURL, "/") + "/api/v1/namespaces/" + sec.Namespace + "/secrets/" + sec.Name
	pattern := `"` + quoteBRE(sec.Key) + `": *"[^"]*"`
	s.Section("Fetch the provisioning Secret over TLS verified with the cluster CA.")
	s.Line("url=" + Quote(url))
	s.Line("resp=/run/osm/provisioning-secret.json")
	s.Line("delay=2")
	s.Raw(`while :; do
  rc=0
  code=$(curl -sS --cacert ` + CACertPath + ` -H @` + ProvisioningAuthPath + ` --connect-timeout 10 --max-time 120 \
    -o "$resp" -w '%{http_code}' "$url") || rc=$?
  case "$rc/$code" in
  0/200) break ;;
  0/401 | 0/403)
    log "the API server refused the provisioning token for $url (HTTP $code): it is invalid or expired; delete the Machine so that it is re-created with a fresh one"
    exit 1 ;;
  51/* | 53/* | 54/* | 58/* | 59/* | 60/* | 66/* | 77/* | 80/* | 82/* | 83/* | 90/* | 91/*)
    log "TLS verification of $url failed (curl exit $rc): the API server's certificate is not signed by the cluster CA in ` + CACertPath + `"
    exit 1 ;;
  *) log "fetching $url failed (curl exit $rc, HTTP $code); retrying in ${delay}s" ;;
  esac
  sleep "$delay"
  delay=$((delay < 32 ? delay * 2 : 60))
done
`)
	s.Line("data=$(grep -o " + Quote(pattern) + ` "$resp" | tail -n 1 | sed -e 's/^.*: *"//' -e 's/"$//') || true`)
	s.Line(`rm -f "$resp"`)
	s.Line(`if [ -z "$data" ]; then log "Secret ` + sec.Namespace + "/" + sec.Name + " has no key " + sec.Key + `"; exit 1; fi`)
	s.Line("cfg=" + FetchedConfigPath)
	s.Line(`printf '%s' "$data" | base64 -d >"$cfg.tmp"`)
	s.Line(`mv "$cfg.tmp" "$cfg"`)
}

// CloudInitHandoff applies the fetched cloud-config with the image's cloud-init, the way upstream OSM does:
// wait for the first boot's run to finish, clean cloud-init's state and run its init stage with the
// configuration as an extra config file (that stage writes the files and units and runs bootcmd; osm-setup
// does the rest). preInit runs between the clean and the init run (provider quirks).
func CloudInitHandoff(preInit func(r *Request, s *Script)) func(r *Request, s *Script) {
	return func(r *Request, s *Script) {
		s.Section("Hand the configuration to cloud-init once the first boot's cloud-init run is over.")
		s.Line("cloud-init status --wait >/dev/null 2>&1 || true")
		s.Line(`install -m 0600 "$cfg" ` + cloudInitProvisioningCfg)
		s.Line(`rm -f "$cfg"`)
		s.Line("# The second run keeps the network configuration and SSH host keys of the first one.")
		s.Line(`printf 'network: {config: disabled}\nssh_deletekeys: false\n' >/etc/cloud/cloud.cfg.d/98-osm-second-run.cfg`)
		s.Line("cloud-init clean")
		if preInit != nil {
			preInit(r, s)
		}
		s.Line("# cloud-init 24.1 moved --file behind the subcommand.")
		s.Line(`ver=$(cloud-init --version 2>&1 | awk '{print $NF}')`)
		s.Line(`if [ "$(printf '%s\n' 24.1 "$ver" | sort -V | head -n 1)" = 24.1 ]; then`)
		s.Line("  cloud-init init --file " + cloudInitProvisioningCfg + ` || log "cloud-init reported errors (exit $?)"`)
		s.Line("else")
		s.Line("  cloud-init --file " + cloudInitProvisioningCfg + ` init || log "cloud-init reported errors (exit $?)"`)
		s.Line("fi")
		s.Line("# Provisioning is driven by " + SetupUnit + " from here on; cloud-init must not run again on reboots.")
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

// proxyVars are the proxy environment variables for ctx.Proxy, upper and lower case because tools disagree
// on which they read.
func proxyVars(p abi.Proxy) [][2]string {
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
