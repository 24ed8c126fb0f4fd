//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConformanceReportSaysWhy: a kubelet whose ExecStartPre fails at every start ends the wait after
// restartLoopAfter restarts instead of the CSR timeout, and the report's "Why" names the unit with its
// journal lines; units that never failed stay out of it.
func TestConformanceReportSaysWhy(t *testing.T) {
	loop := map[string]unitState{
		kubeletUnit: {"Id": kubeletUnit, "ActiveState": "activating", "SubState": "auto-restart", "Result": "exit-code", "NRestarts": "3"},
		containerd:  {"Id": containerd, "ActiveState": "active", "Result": "success", "NRestarts": "0"},
	}
	if err := restartLoop(loop, kubeletUnit, containerd); err == nil || !strings.Contains(err.Error(), kubeletUnit) {
		t.Errorf("restartLoop = %v, want the kubelet named", err)
	}
	loop[kubeletUnit]["NRestarts"] = "1"
	if err := restartLoop(loop, kubeletUnit, containerd); err != nil {
		t.Errorf("one restart ended the run: %v", err)
	}

	// The node saves each watched unit's journal (journalctl -u), which holds its ExecStartPre's output.
	dir := t.TempDir()
	kubeletJournal := strings.Join([]string{
		"Nov 28 05:00:01 node systemd[1]: Starting kubelet.service - kubelet...",
		"Nov 28 05:00:01 node osm-node-env[212]: cat: /etc/hostname: No such file or directory",
		"Nov 28 05:00:01 node systemd[1]: kubelet.service: Control process exited, code=exited, status=1/FAILURE",
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "journal-"+kubeletUnit+".txt"), []byte(kubeletJournal), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &report{dir: dir, units: loop, journal: kubeletJournal + "Nov 28 05:00:01 node containerd[99]: serving...\n"}
	res := newConformanceResult()
	res.Why = explain(r, "osm-setup.service", containerd, kubeletUnit)
	table := res.table()
	for _, want := range []string{"## Why", "### kubelet.service: activating/auto-restart result=exit-code", "osm-node-env[212]: cat: /etc/hostname: No such file or directory"} {
		if !strings.Contains(table, want) {
			t.Errorf("report lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(res.Why, "### "+containerd) || strings.Contains(res.Why, "### osm-setup.service") {
		t.Errorf("units that did not fail are in the Why:\n%s", res.Why)
	}
}
