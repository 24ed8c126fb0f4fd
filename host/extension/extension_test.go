package extension

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/sdk/abi"
)

func profile(name, os, version string, labels map[string]string) *osmv1alpha1.OperatingSystemProfile {
	return &osmv1alpha1.OperatingSystemProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: labels},
		Spec:       osmv1alpha1.OperatingSystemProfileSpec{OSName: osmv1alpha1.OperatingSystem(os), OSVersion: version},
	}
}

func ext(name string, order int32, sel osmv1alpha1.ProfileSelector) osmv1alpha1.OperatingSystemProfileExtension {
	return osmv1alpha1.OperatingSystemProfileExtension{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
		Spec:       osmv1alpha1.OperatingSystemProfileExtensionSpec{Selector: sel, Order: order},
	}
}

func TestSelects(t *testing.T) {
	ubuntu := profile("osp-ubuntu", "ubuntu", "24.04", map[string]string{"site": "eu"})
	for _, tc := range []struct {
		name string
		sel  osmv1alpha1.ProfileSelector
		want bool
	}{
		{"empty selects all", osmv1alpha1.ProfileSelector{}, true},
		{"by name", osmv1alpha1.ProfileSelector{Names: []string{"osp-debian", "osp-ubuntu"}}, true},
		{"other name", osmv1alpha1.ProfileSelector{Names: []string{"osp-debian"}}, false},
		{"by os", osmv1alpha1.ProfileSelector{OSNames: []osmv1alpha1.OperatingSystem{"ubuntu", "debian"}}, true},
		{"other os", osmv1alpha1.ProfileSelector{OSNames: []osmv1alpha1.OperatingSystem{"flatcar"}}, false},
		{"by version", osmv1alpha1.ProfileSelector{OSVersions: []string{"24.04"}}, true},
		{"other version", osmv1alpha1.ProfileSelector{OSVersions: []string{"22.04"}}, false},
		{"by provider", osmv1alpha1.ProfileSelector{CloudProviders: []string{"aws"}}, true},
		{"other provider", osmv1alpha1.ProfileSelector{CloudProviders: []string{"azure"}}, false},
		{"by label", osmv1alpha1.ProfileSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"site": "eu"}}}, true},
		{"other label", osmv1alpha1.ProfileSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"site": "us"}}}, false},
		{"all fields AND", osmv1alpha1.ProfileSelector{Names: []string{"osp-ubuntu"}, OSNames: []osmv1alpha1.OperatingSystem{"debian"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Selects(tc.sel, ubuntu, "aws")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Selects = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSelectsBadLabelSelector(t *testing.T) {
	sel := osmv1alpha1.ProfileSelector{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "site", Operator: "Bogus"}}}}
	all := []osmv1alpha1.OperatingSystemProfileExtension{ext("broken", 0, sel)}
	_, err := For(profile("osp-ubuntu", "ubuntu", "24.04", nil), "aws", all)
	if err == nil || !strings.Contains(err.Error(), "kube-system/broken") || !strings.Contains(err.Error(), "spec.selector.labelSelector") {
		t.Fatalf("want an error naming the extension and the field, got %v", err)
	}
}

func TestForOrdersByOrderThenName(t *testing.T) {
	all := []osmv1alpha1.OperatingSystemProfileExtension{
		ext("zz", 0, osmv1alpha1.ProfileSelector{}),
		ext("late", 10, osmv1alpha1.ProfileSelector{}),
		ext("aa", 0, osmv1alpha1.ProfileSelector{}),
		ext("early", -5, osmv1alpha1.ProfileSelector{}),
		ext("debian-only", -100, osmv1alpha1.ProfileSelector{OSNames: []osmv1alpha1.OperatingSystem{"debian"}}),
	}
	other := ext("elsewhere", 0, osmv1alpha1.ProfileSelector{})
	other.Namespace = "team-a"
	all = append(all, other)
	got, err := For(profile("osp-ubuntu", "ubuntu", "24.04", nil), "aws", all)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range got {
		names = append(names, x.Name)
	}
	if diff := cmp.Diff([]string{"early", "aa", "zz", "late"}, names); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func str(s string) *string { return &s }

func TestMergeAddsAfterTheStage(t *testing.T) {
	cfg := &abi.NodeConfig{
		Files:   []abi.File{abi.PlainFile("/etc/profile-file", 0o644, "p")},
		Units:   []abi.Unit{{Name: "kubelet.service", Content: str("[Service]")}},
		Modules: &abi.Modules{RunCMD: []string{"osm-setup"}},
	}
	m := NewMerger(cfg)
	err := m.Add("site", "spec.provisioningConfig.overrides", nil, &abi.NodeConfig{
		Files:   []abi.File{abi.PlainFile("/etc/sysctl.d/99-site.conf", 0o644, "vm.swappiness = 10\n")},
		Units:   []abi.Unit{{Name: "kubelet.service", DropIns: []abi.DropIn{{Name: "10-site.conf", Content: "[Service]\nNice=-5"}}}},
		Modules: &abi.Modules{RunCMD: []string{"sysctl --system"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &abi.NodeConfig{
		Files:   []abi.File{abi.PlainFile("/etc/profile-file", 0o644, "p"), abi.PlainFile("/etc/sysctl.d/99-site.conf", 0o644, "vm.swappiness = 10\n")},
		Units:   []abi.Unit{{Name: "kubelet.service", Content: str("[Service]"), DropIns: []abi.DropIn{{Name: "10-site.conf", Content: "[Service]\nNice=-5"}}}},
		Modules: &abi.Modules{RunCMD: []string{"osm-setup", "sysctl --system"}},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("merged stage (-want +got):\n%s", diff)
	}
}

func TestMergeConflicts(t *testing.T) {
	base := func() *abi.NodeConfig {
		return &abi.NodeConfig{
			Files:   []abi.File{abi.PlainFile("/etc/containerd/config.toml", 0o644, "profile")},
			Units:   []abi.Unit{{Name: "kubelet.service", Content: str("[Service]"), DropIns: []abi.DropIn{{Name: "10-osm.conf", Content: "x"}}}},
			Modules: &abi.Modules{YumRepos: map[string]map[string]string{"kubernetes": {"baseurl": "https://a"}}},
		}
	}
	for _, tc := range []struct {
		name      string
		first     *abi.NodeConfig // applied by extension "a" before "b", if set
		add       *abi.NodeConfig // applied by extension "b"
		overrides []string
		wantOwner string
		wantKind  string
		wantName  string
	}{
		{name: "file of the profile", add: &abi.NodeConfig{Files: []abi.File{abi.PlainFile("/etc/containerd/config.toml", 0o644, "b")}},
			wantOwner: ProfileOwner, wantKind: "file", wantName: "/etc/containerd/config.toml"},
		{name: "unit of the profile", add: &abi.NodeConfig{Units: []abi.Unit{{Name: "kubelet.service", Content: str("b")}}},
			wantOwner: ProfileOwner, wantKind: "unit", wantName: "kubelet.service"},
		{name: "drop-in of the profile", add: &abi.NodeConfig{Units: []abi.Unit{{Name: "kubelet.service", DropIns: []abi.DropIn{{Name: "10-osm.conf", Content: "b"}}}}},
			wantOwner: ProfileOwner, wantKind: "drop-in", wantName: "kubelet.service/10-osm.conf"},
		{name: "yum repository of the profile", add: &abi.NodeConfig{Modules: &abi.Modules{YumRepos: map[string]map[string]string{"kubernetes": {"baseurl": "https://b"}}}},
			wantOwner: ProfileOwner, wantKind: "yum repository", wantName: "kubernetes"},
		{name: "file of an earlier extension", first: &abi.NodeConfig{Files: []abi.File{abi.PlainFile("/etc/site", 0o644, "a")}},
			add: &abi.NodeConfig{Files: []abi.File{abi.PlainFile("/etc/site", 0o644, "b")}}, wantOwner: "a", wantKind: "file", wantName: "/etc/site"},
		{name: "unit of an earlier extension", first: &abi.NodeConfig{Units: []abi.Unit{{Name: "site.service", Content: str("a")}}},
			add: &abi.NodeConfig{Units: []abi.Unit{{Name: "site.service", Mask: new(bool)}}}, wantOwner: "a", wantKind: "unit", wantName: "site.service"},
		{name: "override of another path does not help", add: &abi.NodeConfig{Files: []abi.File{abi.PlainFile("/etc/containerd/config.toml", 0o644, "b")}},
			overrides: []string{"/etc/other"}, wantOwner: ProfileOwner, wantKind: "file", wantName: "/etc/containerd/config.toml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			m := NewMerger(cfg)
			if tc.first != nil {
				if err := m.Add("a", "spec.provisioningConfig.overrides", nil, tc.first); err != nil {
					t.Fatal(err)
				}
			}
			snapshot := clone(t, cfg)
			err := m.Add("b", "spec.provisioningConfig.overrides", tc.overrides, tc.add)
			var ce *ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("want a ConflictError, got %v", err)
			}
			if ce.Owner != tc.wantOwner || ce.Kind != tc.wantKind || ce.Name != tc.wantName || ce.Extension != "b" {
				t.Errorf("conflict = %+v, want owner %q kind %q name %q", ce, tc.wantOwner, tc.wantKind, tc.wantName)
			}
			if !strings.Contains(err.Error(), "spec.provisioningConfig.overrides") {
				t.Errorf("message does not say where to declare the override: %v", err)
			}
			if diff := cmp.Diff(snapshot, cfg); diff != "" {
				t.Errorf("a conflicting extension changed the stage (-before +after):\n%s", diff)
			}
		})
	}
}

func TestMergeOverrideReplacesInPlace(t *testing.T) {
	cfg := &abi.NodeConfig{Files: []abi.File{
		abi.PlainFile("/etc/a", 0o644, "profile"),
		abi.PlainFile("/etc/containerd/config.toml", 0o644, "profile"),
		abi.PlainFile("/etc/z", 0o644, "profile"),
	}}
	m := NewMerger(cfg)
	if err := m.Add("site", "f", []string{"/etc/containerd/config.toml"}, &abi.NodeConfig{Files: []abi.File{abi.PlainFile("/etc/containerd/config.toml", 0o600, "site")}}); err != nil {
		t.Fatal(err)
	}
	want := []abi.File{abi.PlainFile("/etc/a", 0o644, "profile"), abi.PlainFile("/etc/containerd/config.toml", 0o600, "site"), abi.PlainFile("/etc/z", 0o644, "profile")}
	if diff := cmp.Diff(want, cfg.Files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	// The override makes the extension the owner: a later one that writes it again conflicts with "site".
	err := m.Add("later", "f", nil, &abi.NodeConfig{Files: []abi.File{abi.PlainFile("/etc/containerd/config.toml", 0o600, "later")}})
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Owner != "site" {
		t.Fatalf("want a conflict with extension site, got %v", err)
	}
}

func clone(t *testing.T, cfg *abi.NodeConfig) *abi.NodeConfig {
	t.Helper()
	out := *cfg
	out.Files = append([]abi.File(nil), cfg.Files...)
	out.Units = nil
	for _, u := range cfg.Units {
		u.DropIns = append([]abi.DropIn(nil), u.DropIns...)
		out.Units = append(out.Units, u)
	}
	if cfg.Modules != nil {
		mod := *cfg.Modules
		mod.RunCMD = append([]string(nil), mod.RunCMD...)
		out.Modules = &mod
	}
	return &out
}
