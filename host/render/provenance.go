package render

import (
	"fmt"
	"slices"
	"strings"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/nodeconfig"
	"github.com/osmhq/osm/sdk/abi"
)

// Credential placeholders carry provenance: every contributor to a stage (the profile's templates, its plugin,
// the plugins of spec.plugins, each extension's templates and plugins, a plugin's encoder) is checked right
// after it ran, and a placeholder it put where it may not go fails the render, naming the contributor, before
// any value is substituted. The rules (docs/security.md, "Where credentials may go"):
//
//   - A plugin secret's placeholder (spec.plugin.secrets) may be written only by the plugin that declared it
//     (the profile's spec.plugin), only in the provisioning stage, and only into files that are not
//     world-readable. Those files are then frozen: no later contributor may change them, and nobody else may
//     write any plugin secret placeholder anywhere (a file, a unit, a command, the bootstrap stage).
//   - The cloud-config and registry credential placeholders may reach the bootstrap stage only from the
//     profile's own templates and plugin (upstream's osp-flatcar-cloud-init renders everything in bootstrap);
//     a spec.plugins plugin, an extension or an encoder that adds one there is refused. In the provisioning
//     stage they may go anywhere: that is where they belong.
//   - The bootstrap token's placeholders belong in the bootstrap stage (it fetches the provisioning data with
//     it) and the RHEL subscription password is the MachineDeployment's own; they are not restricted.
//
// The checks are deterministic and need no secret of their own: what is refused is where a placeholder is, not
// whether a contributor could guess it (the placeholders are derived from names, and the OSC shows them).

// pluginSecretPrefix starts every plugin secret placeholder (PluginSecretPlaceholder). Any text starting with it
// counts as one, declared or not, so a guessed or misspelt placeholder is refused as well.
const pluginSecretPrefix = "__OSM_SECRET_PLUGIN_"

// bootstrapGuarded are the placeholders that only the profile's templates and plugin may put into the bootstrap
// stage.
var bootstrapGuarded = []struct{ placeholder, what string }{
	{Placeholders.CloudConfig, "cloud-config"},
	{Placeholders.RegistryAuth, "registry credentials"},
}

// contributorKind says what a contributor may do with placeholders.
type contributorKind int

const (
	// byProfileTemplates is the profile's own templates.
	byProfileTemplates contributorKind = iota
	// byProfilePlugin is the profile's spec.plugin, the only one that gets (and may write) plugin secrets.
	byProfilePlugin
	// byOther is a spec.plugins plugin, an extension's templates or plugins.
	byOther
)

type contributor struct {
	name string
	kind contributorKind
}

// secretFile is a file holding a plugin secret placeholder, as the declaring plugin wrote it.
type secretFile struct {
	path, encoding, data string
	perm                 int32
}

// stageScan is what a stage's configuration holds, as the guard looks at it.
type stageScan struct {
	size        int
	guarded     []int // occurrences of bootstrapGuarded[i]
	secretFiles []secretFile
	elsewhere   []string // places other than files holding a plugin secret placeholder
}

func scanStage(cfg *abi.NodeConfig) stageScan {
	s := stageScan{guarded: make([]int, len(bootstrapGuarded))}
	look := func(where string, text string) bool {
		s.size += len(text)
		if !strings.Contains(text, "__OSM_SECRET_") {
			return false
		}
		for i, g := range bootstrapGuarded {
			s.guarded[i] += strings.Count(text, g.placeholder)
		}
		if !strings.Contains(text, pluginSecretPrefix) {
			return false
		}
		if where != "" {
			s.elsewhere = append(s.elsewhere, where)
		}
		return true
	}
	for _, f := range cfg.Files {
		s.size += len(f.Path)
		if f.Content.Inline == nil {
			continue
		}
		if look("", f.Content.Inline.Data) {
			perm := nodeconfig.DefaultPermissions
			if f.Permissions != nil && *f.Permissions != 0 {
				perm = *f.Permissions
			}
			s.secretFiles = append(s.secretFiles, secretFile{path: f.Path, encoding: f.Content.Inline.Encoding, data: f.Content.Inline.Data, perm: perm})
		}
		look("the path of file "+f.Path, f.Path)
	}
	for _, u := range cfg.Units {
		if u.Content != nil {
			look("unit "+u.Name, *u.Content)
		}
		for _, d := range u.DropIns {
			look("drop-in "+d.Name+" of unit "+u.Name, d.Content)
		}
	}
	for i, k := range cfg.UserSSHKeys {
		look(fmt.Sprintf("userSSHKeys[%d]", i), k)
	}
	if m := cfg.Modules; m != nil {
		for i, c := range m.BootCMD {
			look(fmt.Sprintf("bootcmd[%d]", i), c)
		}
		for i, c := range m.RunCMD {
			look(fmt.Sprintf("runcmd[%d]", i), c)
		}
		for _, k := range abi.SortedKeys(m.RHSubscription) {
			look("rh_subscription "+k, m.RHSubscription[k])
		}
		for _, id := range abi.SortedKeys(m.YumRepos) {
			for _, k := range abi.SortedKeys(m.YumRepos[id]) {
				look("yum repository "+id+" "+k, m.YumRepos[id][k])
			}
		}
		look("yum_repo_dir", m.YumRepoDir)
	}
	return s
}

// worldReadable reports whether the wire permissions (decimal digits read as octal) let every user read.
func worldReadable(wire int32) bool { return wire%10&4 != 0 }

// stageGuard checks each contributor of one stage of one render.
type stageGuard struct {
	stage abi.Stage
	// limit bounds the stage's configuration (the sum of its strings) after every contributor.
	limit int
	last  stageScan
	// frozen are the files holding plugin secret placeholders that the profile's plugin wrote (provisioning).
	frozen []secretFile
}

// stageConfigLimit bounds a stage's configuration before encoding: four times its user-data limit, which leaves
// room for files the encoder compresses (gzip+base64) and stops a stage growing far past what could ever be
// written long before it is encoded.
func stageConfigLimit(stage abi.Stage) int {
	if stage == abi.StageBootstrap {
		return 4 * BootstrapSizeLimit
	}
	return 4 * ProvisioningSizeLimit
}

func newStageGuard(stage abi.Stage) *stageGuard {
	return &stageGuard{stage: stage, limit: stageConfigLimit(stage), last: stageScan{guarded: make([]int, len(bootstrapGuarded))}}
}

// refused is a placeholder a contributor may not write where it did.
func refused(format string, args ...any) error {
	return withReason(osmv1alpha1.ReasonSecretPlaceholderRefused, fmt.Errorf(format, args...))
}

// check looks at the stage's configuration after contributor c ran.
func (g *stageGuard) check(c contributor, cfg *abi.NodeConfig) error {
	s := scanStage(cfg)
	if s.size > g.limit {
		reason := osmv1alpha1.ReasonProvisioningTooLarge
		if g.stage == abi.StageBootstrap {
			reason = osmv1alpha1.ReasonBootstrapTooLarge
		}
		return withReason(reason, fmt.Errorf("%s grows the %s stage's configuration to %d bytes, more than the %d bytes it may hold before encoding (4 times its user-data limit)",
			c.name, g.stage, s.size, g.limit))
	}
	if g.stage == abi.StageBootstrap && c.kind == byOther {
		for i, b := range bootstrapGuarded {
			if s.guarded[i] > g.last.guarded[i] {
				return refused("%s puts the %s placeholder %s into the bootstrap stage, whose user-data machines' metadata services serve to every process on the machine; only the profile's own templates and spec.plugin may place it there",
					c.name, b.what, b.placeholder)
			}
		}
	}
	if err := g.checkPluginSecrets(c, s); err != nil {
		return err
	}
	g.last = s
	return nil
}

func (g *stageGuard) checkPluginSecrets(c contributor, s stageScan) error {
	if c.kind == byProfilePlugin {
		switch {
		case g.stage == abi.StageBootstrap && (len(s.secretFiles) > 0 || len(s.elsewhere) > 0):
			return refused("%s writes a plugin secret placeholder into the bootstrap stage (%s); plugin secrets are substituted only in the provisioning stage",
				c.name, firstPlace(s))
		case len(s.elsewhere) > 0:
			return refused("%s writes a plugin secret placeholder into %s; plugin secrets are substituted only into files", c.name, s.elsewhere[0])
		}
		for _, f := range s.secretFiles {
			if worldReadable(f.perm) {
				return refused("%s writes a plugin secret placeholder into file %s with permissions %04d, which every user of the node can read; plugin secrets go only into files that are not world-readable (e.g. 600 or 640)",
					c.name, f.path, f.perm)
			}
		}
		g.frozen = s.secretFiles
		return nil
	}
	if len(s.elsewhere) > 0 {
		return refused("%s writes a plugin secret placeholder into %s; only the profile's spec.plugin, which declared the secret, may write its placeholder", c.name, s.elsewhere[0])
	}
	for _, f := range s.secretFiles {
		if !slices.Contains(g.frozen, f) {
			if slices.ContainsFunc(g.frozen, func(o secretFile) bool { return o.path == f.path }) {
				return refused("%s changes file %s, which holds a plugin secret placeholder; only the profile's spec.plugin, which declared the secret, may write that file", c.name, f.path)
			}
			return refused("%s writes a plugin secret placeholder into file %s; only the profile's spec.plugin, which declared the secret, may write its placeholder", c.name, f.path)
		}
	}
	return nil
}

func firstPlace(s stageScan) string {
	if len(s.secretFiles) > 0 {
		return "file " + s.secretFiles[0].path
	}
	return s.elsewhere[0]
}

// checkEncoded checks a plugin's encoded user-data against the configuration it encoded: an encoder may copy
// placeholders, never add any that may not be where it put them (plugin secrets; in the bootstrap stage, the
// cloud-config and registry credentials).
func checkEncoded(encoder string, stage abi.Stage, cfgJSON, data []byte) error {
	count := func(b []byte, p string) int { return strings.Count(string(b), p) }
	if n, m := count(data, pluginSecretPrefix), count(cfgJSON, pluginSecretPrefix); n > m {
		return refused("the encoder of %s writes %d plugin secret placeholders into the %s user-data, but the configuration holds %d; encoders copy placeholders, they never add them",
			encoder, n, stage, m)
	}
	if stage == abi.StageBootstrap {
		for _, b := range bootstrapGuarded {
			if n, m := count(data, b.placeholder), count(cfgJSON, b.placeholder); n > m {
				return refused("the encoder of %s puts the %s placeholder %s into the bootstrap user-data %d times, but the configuration holds it %d times; encoders copy placeholders, they never add them",
					encoder, b.what, b.placeholder, n, m)
			}
		}
	}
	return nil
}
