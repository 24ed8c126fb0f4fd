package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGoMemoryLimit(t *testing.T) {
	const budget = 512 << 20
	tests := []struct {
		name    string
		files   map[string]string // under the cgroup root
		want    int64
		wantWhy string
	}{
		{name: "cgroup v2 limit", files: map[string]string{"memory.max": "1073741824\n"}, want: 512 << 20,
			wantWhy: "the cgroup's memory limit (1024 MiB) less the plugin memory budget (512 MiB)"},
		{name: "cgroup v2 without a limit", files: map[string]string{"memory.max": "max\n"}, wantWhy: "the cgroup sets no memory limit"},
		{name: "cgroup v1 limit", files: map[string]string{"memory/memory.limit_in_bytes": "2147483648\n"}, want: 1536 << 20},
		{name: "cgroup v1 without a limit", files: map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"},
			wantWhy: "the cgroup sets no memory limit"},
		{name: "a limit the budget leaves too little of", files: map[string]string{"memory.max": "629145600\n"},
			wantWhy: "leaves less than 128 MiB beside the plugin memory budget (512 MiB): lower -plugin-memory-budget-mib"},
		{name: "no cgroup files", wantWhy: "no cgroup memory limit readable"},
		{name: "garbage", files: map[string]string{"memory.max": "lots\n"}, wantWhy: `cgroup memory limit "lots"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tt.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, why := goMemoryLimit(root, budget)
			if got != tt.want || !strings.Contains(why, tt.wantWhy) {
				t.Errorf("goMemoryLimit = %d (%s), want %d (%s)", got, why, tt.want, tt.wantWhy)
			}
		})
	}
}
