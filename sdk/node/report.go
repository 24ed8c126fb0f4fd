package node

import (
	"strconv"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// Bootstrap reports (sdk/SPEC.md §11): the node tells the cluster how far its bootstrap got, with its own
// MachineDeployment's credential, in the OperatingSystemNodeReport named like its provisioning Secret. The
// functions are shell, written into osm-bootstrap (inline: nothing else is on the machine yet) and into
// ReportScriptPath for osm-setup and the join watcher.
const (
	// ReportScriptPath defines osm_report for osm-setup (which sources it) and, run as `osm-report join`,
	// watches the kubelet start and the Node register.
	ReportScriptPath = "/opt/bin/osm-report"
	// ReportJoinUnit is the transient unit osm-setup starts to run `osm-report join`.
	ReportJoinUnit = "osm-report-join.service"
	// ReportOff marks that the cluster refused a report (reports are off, or the credential is not allowed):
	// the machine stops trying until its next boot.
	ReportOff = "/run/osm/report.off"
	// ReportLogLines is how many of a failing step's last output lines a report carries at most.
	ReportLogLines = 20
	// ReportLineLength is how long each of them may be, in bytes.
	ReportLineLength = 200
)

// Report phases, as OperatingSystemNodeReport's status.machines[].phase takes them.
const (
	PhaseFetched           = "Fetched"
	PhaseApplied           = "Applied"
	PhasePackagesInstalled = "PackagesInstalled"
	PhaseRuntimeUp         = "RuntimeUp"
	PhaseKubeletStarted    = "KubeletStarted"
	PhaseNodeRegistered    = "NodeRegistered"
	PhaseFailed            = "Failed"
)

// Steps a failure names.
const (
	StepBootstrap        = "bootstrap"
	StepApply            = "apply"
	StepPrepare          = "prepare"
	StepPackages         = "packages"
	StepContainerRuntime = "container-runtime"
	StepUnits            = "units"
	StepKubelet          = "kubelet"
	StepNodeRegistration = "node-registration"
)

// ReportURL is the status endpoint of the MachineDeployment's report: the OperatingSystemNodeReport in the
// namespace and with the name of the provisioning Secret.
func ReportURL(r *Request) string {
	sec := r.Ctx.Cluster.ProvisioningSecret
	return strings.TrimRight(r.Ctx.Cluster.ServerURL, "/") + "/apis/operatingsystemmanager.k8c.io/v1alpha1/namespaces/" +
		sec.Namespace + "/operatingsystemnodereports/" + sec.Name + "/status"
}

// ReportFunctions returns shell defining osm_report (see reportShell) for a script whose log function is
// defined. tokenExpr is a shell word whose value is the node's credential.
func ReportFunctions(r *Request, tokenExpr string) string {
	sec := r.Ctx.Cluster.ProvisioningSecret
	return "osm_report_url=" + Quote(ReportURL(r)) + "\n" +
		"osm_report_obj=" + Quote(`"metadata":{"name":"`+sec.Name+`","namespace":"`+sec.Namespace+`"}`) + "\n" +
		"osm_report_tok=" + tokenExpr + "\n" + reportShell
}

// reportShell is osm_report PHASE [STEP EXIT-CODE LOG-FILE]: a server-side apply of this machine's entry,
// under a field manager of its own. It never fails and never waits long: one try and one retry on a
// transient error, each bounded to 5 s; a refusal (401, 403, 404) turns reporting off until the next boot.
// osm_redact is the allow-list the log tail passes on the node (sdk/SPEC.md §11.3).
const reportShell = `osm_report() {
  [ ! -e ` + ReportOff + ` ] || return 0
  local phase=$1 step=${2:-} rc=${3:-} logf=${4:-} m e code
  m=$(cat ` + MachineNamePath + ` 2>/dev/null || true)
  [ -n "$m" ] || m=$(hostname 2>/dev/null || true)
  m=$(printf %s "$m" | tr '[:upper:]' '[:lower:]' | tr -cd 'a-z0-9.-' | cut -c 1-253)
  [ -n "$m" ] || return 0
  e='"phase":"'$phase'","time":"'$(date -u +%Y-%m-%dT%H:%M:%SZ)'"'
  if [ -n "$step" ]; then
    rc=$(printf %s "$rc" | tr -cd 0-9 | cut -c 1-3)
    e=$e',"step":"'$step'","exitCode":'$(( 10#${rc:-1} > 255 ? 255 : 10#${rc:-1} ))
    if [ -n "$logf" ] && [ -s "$logf" ] && declare -F osm_redact >/dev/null; then e=$e',"logTail":['$(osm_redact "$logf" || true)']'; fi
  fi
  code=$(printf '{"apiVersion":"operatingsystemmanager.k8c.io/v1alpha1","kind":"OperatingSystemNodeReport",%s,"status":{"machines":{"%s":{%s}}}}' "$osm_report_obj" "$m" "$e" |
    curl -sS --cacert ` + CACertPath + ` -H @<(printf 'Authorization: Bearer %s\n' "$osm_report_tok") \
      -H 'Content-Type: application/apply-patch+yaml' -X PATCH --data-binary @- \
      --connect-timeout 5 -m 5 --retry 1 --retry-delay 1 -o /dev/null -w '%{http_code}' \
      "$osm_report_url?fieldManager=osm-node-${m:0:110}&force=true" 2>/dev/null) || true
  case $code in
  2??) ;;
  401 | 403 | 404) mkdir -p /run/osm; touch ` + ReportOff + `; log "the cluster refused the bootstrap report (HTTP $code); reporting stays off until the next boot" ;;
  *) log "could not report phase $phase (HTTP ${code:-none}); going on" ;;
  esac
  return 0
}
`

// redactShell is osm_redact LOG-FILE: the last lines of LOG-FILE as a JSON array of strings, each passed
// through the allow-list of sdk/SPEC.md §11.3. osm-bootstrap goes without it (its size counts against the
// providers' user-data limits, and its failures, a refused credential or certificate, need no log tail).
var redactShell = `osm_redact() {
  tail -n ` + strconv.Itoa(ReportLogLines) + ` "$1" 2>/dev/null | LC_ALL=C awk '
  BEGIN { for (i = 32; i < 127; i++) if (i != 34 && i != 92) safe = safe sprintf("%c", i) }
  function secretish(w, before) {
    if (length(w) == 16 && before ~ /[a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][.]$/) return 1
    if (length(w) < 16) return 0
    return !(w ~ /^[0-9]+$/ || w ~ /^[a-z]+$/ || w ~ /^[A-Z]+$/)
  }
  {
    gsub(/\t/, " ")
    line = ""
    for (i = 1; i <= length($0) && i <= 400; i++) { c = substr($0, i, 1); line = line (index(safe, c) ? c : "?") }
    lc = tolower(line)
    if (match(lc, /(passw(or)?d|passphrase|token|secret|authori[sz]ation|credentials?|api[-_]?key|private[-_]?key|session)[a-z_-]*[^a-z0-9 ]?[ ]*[:=]/)) line = substr(line, 1, RSTART + RLENGTH - 1) " <redacted>"
    lc = tolower(line)
    if (match(lc, /(bearer|basic)[ ]+/)) line = substr(line, 1, RSTART + RLENGTH - 1) "<redacted>"
    gsub(/:\/\/[^\/@ ]+@/, "://<redacted>@", line)
    out = ""; rest = line
    while (match(rest, /[A-Za-z0-9]+/)) {
      w = substr(rest, RSTART, RLENGTH); pre = substr(rest, 1, RSTART - 1)
      out = out pre (secretish(w, out pre) ? "<redacted>" : w)
      rest = substr(rest, RSTART + RLENGTH)
    }
    line = substr(out rest, 1, ` + strconv.Itoa(ReportLineLength) + `)
    printf "%s\"%s\"", (n++ ? "," : ""), line
  }'
}
`

// reportCapture sends the rest of the script's output through tee into logFile as well, and reports a
// failure (the step in $osm_step, the exit code, the last lines of logFile) when the script exits with one.
// A shell has one EXIT trap: a later part of the script that sets its own must call osm_on_exit with the
// exit status (as DownloadHelper's does), or failures after it go unreported.
func reportCapture(s *Script, logFile string) {
	s.Line("osm_log=" + logFile + " osm_step=" + StepPrepare)
	s.Line("mkdir -p /run/osm; : >$osm_log; exec 3>&2; exec > >(tee -a $osm_log >&3) 2>&1; osm_tee=$!")
	s.Raw(`osm_on_exit() {
  local rc=${1:-$?} i
  [ "$rc" != 0 ] || return 0
  exec 1>&3 2>&3
  for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$osm_tee" 2>/dev/null || break; sleep 0.2; done
  osm_report ` + PhaseFailed + ` "$osm_step" "$rc" "$osm_log"
}
trap osm_on_exit EXIT
`)
}

// reportFetched reports the Fetched phase from osm-bootstrap, whose fetch holds the token in $tok. It is one
// JSON merge patch of this machine's phase, without the report functions: the bootstrap is user-data, and
// every byte counts against the providers' limits. Its failures need no report of their own: a refused
// credential or certificate would refuse the report as well, and a machine that stays at Fetched never ran
// osm-setup (docs/operations.md).
func reportFetched(r *Request, s *Script) {
	s.Line(`m=$(cat ` + MachineNamePath + ` 2>/dev/null || hostname); m=$(printf %s "$m" | tr A-Z a-z | tr -cd a-z0-9.-)`)
	s.Line(`printf '{"status":{"machines":{"%s":{"phase":"` + PhaseFetched + `"}}}}' "$m" | curl -sS --cacert ` + CACertPath +
		` -H @<(printf 'Authorization: Bearer %s\n' "$tok") -H 'Content-Type: application/merge-patch+json' -X PATCH -d @- -m 5 -o /dev/null ` +
		Quote(ReportURL(r)) + `"?fieldManager=osm-node-$m" || true`)
}

// reportStep marks the step osm-setup is in and, when phase is set, reports that the previous one is done.
func reportStep(s *Script, phase, step string) {
	if phase != "" {
		s.Line("osm_report " + phase)
	}
	if step != "" {
		s.Line("osm_step=" + step)
	}
}

// reportSetup starts osm-setup's reporting: the functions of ReportScriptPath (a no-op when a profile removed
// the file) and the failure report on exit.
func reportSetup(s *Script) {
	s.Section("Bootstrap reports to the cluster (sdk/SPEC.md §11); they never stop the setup.")
	s.Line("if [ -r " + ReportScriptPath + " ]; then . " + ReportScriptPath + "; else osm_report() { :; }; fi")
	reportCapture(s, "/run/osm/osm-setup.log")
	s.Line("osm_report " + PhaseApplied)
}

// reportJoin starts the join watcher as a unit of its own: the kubelet starts after osm-setup ends.
func reportJoin(s *Script) {
	s.Line("osm_step=" + StepKubelet)
	s.Line("if [ -x " + ReportScriptPath + " ]; then systemd-run --no-block --collect --unit=" + ReportJoinUnit + " " + ReportScriptPath + ` join || log "could not start the join report"; fi`)
}

// ReportScriptFile is ReportScriptPath: the report functions with the node's credential (the bootstrap token
// placeholder, which the host substitutes) and, run as `osm-report join`, the join watcher: it reports
// KubeletStarted once the kubelet runs and NodeRegistered once the Node can be read with the kubelet's own
// client certificate, or a failure with the kubelet's last log lines after 15 minutes.
func ReportScriptFile(r *Request) abi.File {
	s := &Script{}
	s.Line("#!/bin/bash")
	s.Line("# osm-report (generated by OSM): tell the cluster how this machine's bootstrap goes (sdk/SPEC.md §11).")
	s.Line("# osm-setup sources it for osm_report; `osm-report join` watches the kubelet and the Node.")
	s.Line("set -uo pipefail")
	s.Line(`declare -F log >/dev/null || log() { echo "osm-report: $*" >&2; }`)
	s.Raw(ReportFunctions(r, Quote(r.Ctx.Secrets.BootstrapToken)))
	s.Raw(redactShell)
	s.Raw(`osm_join() {
  local i name code logf=/run/osm/kubelet.log
  for i in $(seq 1 90); do systemctl is-active --quiet ` + KubeletUnit + ` && break; sleep 10; done
  if ! systemctl is-active --quiet ` + KubeletUnit + `; then
    journalctl -u ` + KubeletUnit + ` -n 20 --no-pager -o cat >$logf 2>&1 || true
    osm_report ` + PhaseFailed + ` ` + StepKubelet + ` 1 $logf
    return 0
  fi
  osm_report ` + PhaseKubeletStarted + `
  name=$(sed -n 's/^KUBELET_HOSTNAME=//p' ` + NodeEnvPath + ` 2>/dev/null || true)
  for i in $(seq 1 90); do
    code=$(curl -sS --cacert ` + CACertPath + ` --cert ` + KubeletCertDir + `/kubelet-client-current.pem --key ` + KubeletCertDir + `/kubelet-client-current.pem \
      --connect-timeout 5 -m 10 -o /dev/null -w '%{http_code}' "${osm_report_url%%/apis/*}/api/v1/nodes/$name" 2>/dev/null) || true
    if [ "$code" = 200 ]; then osm_report ` + PhaseNodeRegistered + `; return 0; fi
    sleep 10
  done
  journalctl -u ` + KubeletUnit + ` -n 20 --no-pager -o cat >$logf 2>&1 || true
  osm_report ` + PhaseFailed + ` ` + StepNodeRegistration + ` 1 $logf
}
if [ "${BASH_SOURCE[0]:-}" = "$0" ] && [ "${1:-}" = join ]; then osm_join; fi
`)
	return abi.PlainFile(ReportScriptPath, 0o700, s.String())
}
