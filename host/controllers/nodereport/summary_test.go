package nodereport

import (
	"fmt"
	"reflect"
	"testing"

	"k8s.io/utils/ptr"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

func TestSummarize(t *testing.T) {
	failed := func(step string) osmv1alpha1.MachineBootstrapReport {
		return osmv1alpha1.MachineBootstrapReport{Phase: osmv1alpha1.PhaseFailed, Step: step, ExitCode: ptr.To[int32](100), LogTail: []string{"E: Unable to locate package jq"}}
	}
	many := map[string]osmv1alpha1.MachineBootstrapReport{}
	for i := range maxFailing + 5 {
		many[fmt.Sprintf("m-%02d", i)] = failed("packages")
	}
	for _, tc := range []struct {
		name     string
		machines map[string]osmv1alpha1.MachineBootstrapReport
		want     osmv1alpha1.NodeBootstrapSummary
		failing  []string
	}{
		{name: "none", want: osmv1alpha1.NodeBootstrapSummary{}},
		{name: "one of each", machines: map[string]osmv1alpha1.MachineBootstrapReport{
			"b": {Phase: osmv1alpha1.PhaseNodeRegistered}, "a": {Phase: osmv1alpha1.PhaseRuntimeUp}, "c": failed("container-runtime"), "d": {Phase: osmv1alpha1.PhaseFetched},
		}, want: osmv1alpha1.NodeBootstrapSummary{Joined: 1, Booting: 2, Failed: 1, Phases: map[osmv1alpha1.BootstrapPhase]int32{
			osmv1alpha1.PhaseNodeRegistered: 1, osmv1alpha1.PhaseRuntimeUp: 1, osmv1alpha1.PhaseFailed: 1, osmv1alpha1.PhaseFetched: 1}}, failing: []string{"c"}},
		{name: "more failing machines than the OSC names", machines: many,
			want: osmv1alpha1.NodeBootstrapSummary{Failed: int32(maxFailing + 5), Phases: map[osmv1alpha1.BootstrapPhase]int32{osmv1alpha1.PhaseFailed: int32(maxFailing + 5)}},
			failing: func() []string {
				var out []string
				for i := range maxFailing {
					out = append(out, fmt.Sprintf("m-%02d", i))
				}
				return out
			}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.machines)
			var names []string
			for _, f := range got.Failing {
				names = append(names, f.Name)
				if f.Step == "" || f.ExitCode == nil || len(f.LogTail) != 1 {
					t.Errorf("failing machine %+v lacks its step, exit code or log tail", f)
				}
			}
			if !reflect.DeepEqual(names, tc.failing) {
				t.Errorf("failing %v, want %v", names, tc.failing)
			}
			got.Failing = nil
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("summary %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func TestFailureKey(t *testing.T) {
	a := osmv1alpha1.MachineBootstrapReport{Phase: osmv1alpha1.PhaseFailed, Step: "packages", ExitCode: ptr.To[int32](100)}
	b := a
	b.LogTail = []string{"another attempt, other output"}
	c := a
	c.ExitCode = ptr.To[int32](1)
	if failureKey("m", a) != failureKey("m", b) {
		t.Error("a retry of the same step with the same exit code is the same failure")
	}
	if failureKey("m", a) == failureKey("m", c) || failureKey("m", a) == failureKey("n", a) {
		t.Error("another exit code or machine is another failure")
	}
}
