package templates

import (
	"context"
	"errors"
	"fmt"
	"testing"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

func section(n int, src string) *osmv1alpha1.OSPConfig {
	cfg := &osmv1alpha1.OSPConfig{}
	for i := range n {
		cfg.Files = append(cfg.Files, osmv1alpha1.File{Path: fmt.Sprintf("/f%d", i),
			Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: src}}})
	}
	return cfg
}

// TestSectionsOfAStageShareItsBudget: the sections rendered within one Stage (a profile's and its extensions')
// draw on one budget of steps and output, so each one within the limits on its own does not let many of them
// together exceed the stage's; RenderStage alone still gives each call a budget of its own.
func TestSectionsOfAStageShareItsBudget(t *testing.T) {
	lim := DefaultLimits()
	lim.Steps = 100
	ctx := WithLimits(context.Background(), lim)
	loop := `{{ range until 30 }}.{{ end }}` // 31 steps: within the budget three times, not four
	for i := range 3 {
		if _, err := RenderStage(ctx, "s", section(1, loop), "containerd", nil); err != nil {
			t.Fatalf("RenderStage %d: %v", i, err)
		}
	}
	st := NewStage(ctx, 0)
	defer st.Close()
	var err error
	for i := 0; i < 4 && err == nil; i++ {
		_, err = st.Render(fmt.Sprintf("extension %d", i), section(1, loop), "containerd", nil)
	}
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "Steps" {
		t.Fatalf("four sections of 31 steps in one stage of 100: %v, want the Steps limit", err)
	}

	// The caller's bound on the stage's output replaces a larger StageOutputBytes, and applies across sections.
	st = NewStage(context.Background(), 3000)
	defer st.Close()
	if _, err := st.Render("profile", section(1, `{{ "x" | repeat 2000 }}`), "containerd", nil); err != nil {
		t.Fatal(err)
	}
	_, err = st.Render("extension", section(1, `{{ "x" | repeat 2000 }}`), "containerd", nil)
	if !errors.As(err, &le) || le.Limit != "StageOutputBytes" || le.Max != 3000 {
		t.Fatalf("4000 bytes in a stage bounded to 3000: %v, want StageOutputBytes of 3000", err)
	}
}
