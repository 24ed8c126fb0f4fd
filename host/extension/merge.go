package extension

import (
	"fmt"
	"maps"
	"slices"

	"github.com/osmhq/osm/sdk/abi"
)

// ProfileOwner names what the profile itself (its templates and plugins) wrote, in conflict messages.
const ProfileOwner = "the profile"

// ConflictError says that an extension writes something the stage already has from the profile or from an
// earlier extension, without declaring that it overrides it.
type ConflictError struct {
	// Extension is the extension that collided; Owner is who wrote the item first (ProfileOwner or an
	// extension's name).
	Extension, Owner string
	// Kind is "file", "unit", "drop-in", "yum repository", "rh_subscription" or "yum_repo_dir"; Name identifies
	// the item (a path, a unit name, "<unit>/<drop-in>", a repository id).
	Kind, Name string
	// Field is where the extension can declare the override, e.g. spec.provisioningConfig.overrides.
	Field string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("extension %q writes %s %s, which %s already writes; add %q to %s of %q to replace it",
		e.Extension, e.Kind, e.Name, ownerPhrase(e.Owner), e.Name, e.Field, e.Extension)
}

func ownerPhrase(owner string) string {
	if owner == ProfileOwner {
		return owner
	}
	return fmt.Sprintf("extension %q", owner)
}

// Merger merges extensions into one stage in order, remembering who wrote each item so that a collision names
// both sides. Use one Merger per stage.
type Merger struct {
	cfg    *abi.NodeConfig
	owners map[string]string // kind + "\x00" + name -> owner
}

// NewMerger starts merging into cfg, whose current content counts as written by the profile.
func NewMerger(cfg *abi.NodeConfig) *Merger {
	m := &Merger{cfg: cfg, owners: map[string]string{}}
	for _, f := range cfg.Files {
		m.own("file", f.Path, ProfileOwner)
	}
	for _, u := range cfg.Units {
		m.ownUnit(u, ProfileOwner)
	}
	if mod := cfg.Modules; mod != nil {
		for id := range mod.YumRepos {
			m.own("yum repository", id, ProfileOwner)
		}
		if len(mod.RHSubscription) > 0 {
			m.own("rh_subscription", "rh_subscription", ProfileOwner)
		}
		if mod.YumRepoDir != "" {
			m.own("yum_repo_dir", "yum_repo_dir", ProfileOwner)
		}
	}
	return m
}

func (m *Merger) ownUnit(u abi.Unit, owner string) {
	if u.Content != nil || u.Mask != nil || u.Enable != nil {
		m.own("unit", u.Name, owner)
	}
	for _, d := range u.DropIns {
		m.own("drop-in", u.Name+"/"+d.Name, owner)
	}
}

func (m *Merger) own(kind, name, owner string) { m.owners[kind+"\x00"+name] = owner }

// claim records that ext writes the item, or returns a conflict when someone else wrote it and ext does not
// override it.
func (m *Merger) claim(ext, field string, overrides []string, kind, name string) error {
	key := kind + "\x00" + name
	if owner, ok := m.owners[key]; ok && !slices.Contains(overrides, name) {
		return &ConflictError{Extension: ext, Owner: owner, Kind: kind, Name: name, Field: field}
	}
	m.owners[key] = ext
	return nil
}

// Add merges add, the rendered stage configuration of extension ext, into the stage. Files and units are added
// after the stage's own, or replace them in place when ext overrides them; a unit that carries only drop-ins
// adds them to the stage's unit of that name; bootcmd and runcmd lines are appended; SSH keys are appended
// without duplicates. field names where ext declares its overrides, for the conflict message. Add checks every
// item before changing anything, so a conflict leaves the stage as it was.
func (m *Merger) Add(ext, field string, overrides []string, add *abi.NodeConfig) error {
	if err := m.claimAll(ext, field, overrides, add); err != nil {
		return err
	}
	for _, f := range add.Files {
		m.cfg.SetFile(f)
	}
	for _, u := range add.Units {
		m.addUnit(u)
	}
	for _, k := range add.UserSSHKeys {
		if !slices.Contains(m.cfg.UserSSHKeys, k) {
			m.cfg.UserSSHKeys = append(m.cfg.UserSSHKeys, k)
		}
	}
	if add.Modules != nil {
		m.addModules(add.Modules)
	}
	return nil
}

// claimAll claims every item of add on a copy of the owners, committing only when none conflicts.
func (m *Merger) claimAll(ext, field string, overrides []string, add *abi.NodeConfig) error {
	trial := &Merger{cfg: m.cfg, owners: maps.Clone(m.owners)}
	for _, f := range add.Files {
		if err := trial.claim(ext, field, overrides, "file", f.Path); err != nil {
			return err
		}
	}
	for _, u := range add.Units {
		if u.Content != nil || u.Mask != nil || u.Enable != nil {
			if err := trial.claim(ext, field, overrides, "unit", u.Name); err != nil {
				return err
			}
		}
		for _, d := range u.DropIns {
			if err := trial.claim(ext, field, overrides, "drop-in", u.Name+"/"+d.Name); err != nil {
				return err
			}
		}
	}
	if mod := add.Modules; mod != nil {
		for _, id := range abi.SortedKeys(mod.YumRepos) {
			if err := trial.claim(ext, field, overrides, "yum repository", id); err != nil {
				return err
			}
		}
		if len(mod.RHSubscription) > 0 {
			if err := trial.claim(ext, field, overrides, "rh_subscription", "rh_subscription"); err != nil {
				return err
			}
		}
		if mod.YumRepoDir != "" {
			if err := trial.claim(ext, field, overrides, "yum_repo_dir", "yum_repo_dir"); err != nil {
				return err
			}
		}
	}
	m.owners = trial.owners
	return nil
}

// addUnit merges u: a unit with content, mask or enable replaces the stage's unit of that name (its drop-ins
// merged); a unit with only drop-ins adds them to it.
func (m *Merger) addUnit(u abi.Unit) {
	cur := m.cfg.Unit(u.Name)
	if cur == nil {
		m.cfg.Units = append(m.cfg.Units, u)
		return
	}
	if u.Content != nil || u.Mask != nil || u.Enable != nil {
		cur.Content, cur.Mask, cur.Enable = u.Content, u.Mask, u.Enable
	}
	for _, d := range u.DropIns {
		i := slices.IndexFunc(cur.DropIns, func(x abi.DropIn) bool { return x.Name == d.Name })
		if i >= 0 {
			cur.DropIns[i] = d
		} else {
			cur.DropIns = append(cur.DropIns, d)
		}
	}
}

func (m *Merger) addModules(add *abi.Modules) {
	mod := m.cfg.EnsureModules()
	mod.BootCMD = append(mod.BootCMD, add.BootCMD...)
	mod.RunCMD = append(mod.RunCMD, add.RunCMD...)
	if len(add.YumRepos) > 0 && mod.YumRepos == nil {
		mod.YumRepos = map[string]map[string]string{}
	}
	for id, repo := range add.YumRepos {
		mod.YumRepos[id] = maps.Clone(repo)
	}
	if len(add.RHSubscription) > 0 {
		mod.RHSubscription = maps.Clone(add.RHSubscription)
	}
	if add.YumRepoDir != "" {
		mod.YumRepoDir = add.YumRepoDir
	}
}
