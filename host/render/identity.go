package render

import (
	"fmt"
	"strings"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/sdk/abi"
)

// A plugin sees the MachineDeployment's name, namespace and revision as placeholders (abi.IdentityPlaceholders),
// like credentials, and the host substitutes the real values into everything the render produced: the
// stages' configurations (so the OperatingSystemConfig and the user-data hold the real names), the plugins'
// warnings and a plugin's encoded user-data. The plugin requests of two MachineDeployments that differ only in
// those are then the same bytes, and the plugin manager's output memo (host/plugin memo.go) renders them once.
//
// A plugin that declares abi.Metadata.RealIdentity gets the real values, and so does every plugin when a value
// is not a DNS name (only those are substituted blindly into any context: shell, YAML, JSON, URLs, unit files).
// The profile's and the extensions' templates always see the real values: they run in the host.

// identityPlaceholders turns the placeholders on; tests turn them off to compare with what plugins rendered from
// the real values.
var identityPlaceholders = true

// identity is what tells this MachineDeployment from its neighbours, as plugins see it and as it is.
type identity struct {
	real, shown abi.ObjectRef
	// replacer puts the real values in place of the placeholders shown; nil when none is shown.
	replacer *strings.Replacer
}

func newIdentity(md *clusterv1alpha1.MachineDeployment) identity {
	id := identity{real: abi.ObjectRef{Name: md.Name, Namespace: md.Namespace, Revision: md.Annotations[clusterv1alpha1.AnnotationRevision]}}
	id.shown = id.real
	if !identityPlaceholders {
		return id
	}
	var pairs []string
	for _, f := range []struct {
		real        string
		shown       *string
		placeholder string
	}{
		{id.real.Name, &id.shown.Name, abi.IdentityPlaceholders.Name},
		{id.real.Namespace, &id.shown.Namespace, abi.IdentityPlaceholders.Namespace},
		{id.real.Revision, &id.shown.Revision, abi.IdentityPlaceholders.Revision},
	} {
		if dnsName(f.real) {
			*f.shown = f.placeholder
			pairs = append(pairs, f.placeholder, f.real)
		}
	}
	if len(pairs) > 0 {
		id.replacer = strings.NewReplacer(pairs...)
	}
	return id
}

// dnsName reports whether s is non-empty and only lower case letters, digits, '-' and '.': text that means
// the same, needs no quoting and cannot form a placeholder wherever a plugin put the placeholder.
func dnsName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// provisioningSecretName is ProvisioningSecretName for a name and namespace as plugins see them.
func provisioningSecretName(ref abi.ObjectRef) string {
	return fmt.Sprintf("%s-%s-provisioning-config", ref.Name, ref.Namespace)
}

// realContext is rc with the real values, for a plugin that declared abi.Metadata.RealIdentity.
func (id identity) realContext(rc abi.RenderContext) abi.RenderContext {
	rc.MachineDeployment = id.real
	rc.Cluster.ProvisioningSecret.Name = provisioningSecretName(id.real)
	return rc
}

// forPlugin is the context and input a plugin gets: as they are, or with the real values for a plugin that
// asked for them (the input may hold placeholders an earlier plugin copied).
func (id identity) forPlugin(md abi.Metadata, rc abi.RenderContext, in *abi.NodeConfig) (abi.RenderContext, *abi.NodeConfig) {
	if !md.RealIdentity || id.replacer == nil {
		return rc, in
	}
	return id.realContext(rc), id.apply(in)
}

// replace substitutes the real values in s.
func (id identity) replace(s string) string {
	if id.replacer == nil || !strings.Contains(s, "__OSM_MD_") {
		return s
	}
	return id.replacer.Replace(s)
}

// apply returns cfg with the real values in place of the placeholders, in every string it holds; cfg itself
// when it holds none.
func (id identity) apply(cfg *abi.NodeConfig) *abi.NodeConfig {
	if id.replacer == nil || cfg == nil {
		return cfg
	}
	r := id.replace
	// Nil stays nil and empty stays empty, so the configuration encodes exactly as it would have.
	out := &abi.NodeConfig{UserSSHKeys: replaceAll(cfg.UserSSHKeys, r)}
	if cfg.Files != nil {
		out.Files = make([]abi.File, 0, len(cfg.Files))
	}
	for _, f := range cfg.Files {
		f.Path = r(f.Path)
		if in := f.Content.Inline; in != nil {
			f.Content = abi.FileContent{Inline: &abi.FileContentInline{Encoding: in.Encoding, Data: r(in.Data)}}
		}
		out.Files = append(out.Files, f)
	}
	if cfg.Units != nil {
		out.Units = make([]abi.Unit, 0, len(cfg.Units))
	}
	for _, u := range cfg.Units {
		u.Name = r(u.Name)
		if u.Content != nil {
			c := r(*u.Content)
			u.Content = &c
		}
		if u.DropIns != nil {
			dropIns := make([]abi.DropIn, 0, len(u.DropIns))
			for _, d := range u.DropIns {
				dropIns = append(dropIns, abi.DropIn{Name: r(d.Name), Content: r(d.Content)})
			}
			u.DropIns = dropIns
		}
		out.Units = append(out.Units, u)
	}
	if m := cfg.Modules; m != nil {
		mm := &abi.Modules{YumRepoDir: r(m.YumRepoDir), BootCMD: replaceAll(m.BootCMD, r), RunCMD: replaceAll(m.RunCMD, r),
			RHSubscription: replaceMap(m.RHSubscription, r)}
		if m.YumRepos != nil {
			mm.YumRepos = make(map[string]map[string]string, len(m.YumRepos))
			for id, repo := range m.YumRepos {
				mm.YumRepos[r(id)] = replaceMap(repo, r)
			}
		}
		out.Modules = mm
	}
	return out
}

func replaceAll(list []string, r func(string) string) []string {
	if list == nil {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = r(s)
	}
	return out
}

func replaceMap(m map[string]string, r func(string) string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[r(k)] = r(v)
	}
	return out
}
