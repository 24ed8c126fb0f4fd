// Package nodereport folds what machines report about their bootstrap (OperatingSystemNodeReport, written by
// the nodes themselves, sdk/SPEC.md §11) into their MachineDeployment's OperatingSystemConfig status, names
// failing machines in a Warning event and in metrics, and prunes the reports of machines that no longer
// exist. Reports only ever flow into status, events and metrics: nothing here feeds a render.
package nodereport

import (
	"sort"
	"strconv"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// maxFailing is how many failing machines the OSC names (the CRD's bound).
const maxFailing = 20

// Summarize counts the machines of a report by phase and names the failing ones, by name.
func Summarize(machines map[string]osmv1alpha1.MachineBootstrapReport) *osmv1alpha1.NodeBootstrapSummary {
	s := &osmv1alpha1.NodeBootstrapSummary{}
	if len(machines) == 0 {
		return s
	}
	s.Phases = map[osmv1alpha1.BootstrapPhase]int32{}
	names := make([]string, 0, len(machines))
	for name := range machines {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m := machines[name]
		s.Phases[m.Phase]++
		switch m.Phase {
		case osmv1alpha1.PhaseNodeRegistered:
			s.Joined++
		case osmv1alpha1.PhaseFailed:
			s.Failed++
			if len(s.Failing) < maxFailing {
				s.Failing = append(s.Failing, osmv1alpha1.FailingMachine{Name: name, Step: m.Step, ExitCode: m.ExitCode, LogTail: m.LogTail, Time: m.Time})
			}
		default:
			s.Booting++
		}
	}
	return s
}

// failureKey identifies one failure of a machine: the same step with the same exit code is the same failure,
// however often osm-setup retries it.
func failureKey(name string, m osmv1alpha1.MachineBootstrapReport) string {
	code := "?"
	if m.ExitCode != nil {
		code = strconv.Itoa(int(*m.ExitCode))
	}
	return name + "/" + m.Step + "/" + code
}
