package app

import (
	"os"
	"strconv"
	"testing"

	clientfeatures "k8s.io/client-go/features"
)

// recordingGates records what is set on it.
type recordingGates struct {
	set map[clientfeatures.Feature]bool
}

func (g *recordingGates) Enabled(clientfeatures.Feature) bool { return true }

func (g *recordingGates) Set(f clientfeatures.Feature, v bool) error {
	g.set[f] = v
	return nil
}

// readOnlyGates are gates someone installed with ReplaceFeatureGates that cannot be set.
type readOnlyGates struct{}

func (readOnlyGates) Enabled(clientfeatures.Feature) bool { return true }

func TestCachesAreFilledByListingUnlessTheOperatorChose(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantSet map[clientfeatures.Feature]bool
	}{
		{name: "nothing chosen", wantSet: map[clientfeatures.Feature]bool{clientfeatures.WatchListClient: false}},
		{name: "the operator turned streaming on", env: map[string]string{watchListEnv: "true"}, wantSet: map[clientfeatures.Feature]bool{}},
		{name: "the operator turned it off", env: map[string]string{watchListEnv: "false"}, wantSet: map[clientfeatures.Feature]bool{}},
		{name: "another gate chosen", env: map[string]string{"KUBE_FEATURE_InformerResourceVersion": "true"},
			wantSet: map[clientfeatures.Feature]bool{clientfeatures.WatchListClient: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &recordingGates{set: map[clientfeatures.Feature]bool{}}
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			if err := preferListing(g, lookup); err != nil {
				t.Fatal(err)
			}
			if len(g.set) != len(tc.wantSet) || g.set[clientfeatures.WatchListClient] != tc.wantSet[clientfeatures.WatchListClient] {
				t.Errorf("set %v, want %v", g.set, tc.wantSet)
			}
		})
	}
	if err := preferListing(readOnlyGates{}, func(string) (string, bool) { return "", false }); err != nil {
		t.Errorf("gates that cannot be set belong to whoever installed them; got %v", err)
	}
}

// TestTheControllersInformersList checks client-go's real gate after New's first step: off, or what the
// environment of this test says.
func TestTheControllersInformersList(t *testing.T) {
	if err := fillCachesByListing(); err != nil {
		t.Fatal(err)
	}
	want := false
	if v, ok := os.LookupEnv(watchListEnv); ok {
		want, _ = strconv.ParseBool(v)
	}
	if got := clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient); got != want {
		t.Errorf("WatchListClient enabled = %v, want %v", got, want)
	}
}
