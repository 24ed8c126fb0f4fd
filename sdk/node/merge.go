package node

import "github.com/osmhq/osm/sdk/abi"

// Merge applies a profile's template output (input) on top of the plugin's own configuration (own) and
// returns the result; neither argument is modified.
//
// Templates are the operator's customization point, so the input wins wherever both define something:
//   - an input file replaces the plugin's file with the same path, in place; other input files follow;
//   - an input unit replaces the plugin's unit with the same name, in place; other input units follow;
//   - input bootcmd and runcmd commands run after the plugin's;
//   - input rh_subscription, yum_repos and yum_repo_dir are kept (the host injects the RHEL subscription);
//   - SSH keys are the union, plugin keys first, without duplicates.
func Merge(own, input *abi.NodeConfig) *abi.NodeConfig {
	out := &abi.NodeConfig{
		Files: append([]abi.File(nil), own.Files...),
		Units: append([]abi.Unit(nil), own.Units...),
	}
	for _, f := range input.Files {
		out.SetFile(f)
	}
	for _, u := range input.Units {
		out.SetUnit(u)
	}
	seen := map[string]bool{}
	for _, k := range append(append([]string(nil), own.UserSSHKeys...), input.UserSSHKeys...) {
		if !seen[k] {
			seen[k] = true
			out.UserSSHKeys = append(out.UserSSHKeys, k)
		}
	}
	out.Modules = mergeModules(own.Modules, input.Modules)
	return out
}

func mergeModules(own, input *abi.Modules) *abi.Modules {
	if own == nil && input == nil {
		return nil
	}
	var o, in abi.Modules
	if own != nil {
		o = *own
	}
	if input != nil {
		in = *input
	}
	m := &abi.Modules{
		BootCMD:        append(append([]string(nil), o.BootCMD...), in.BootCMD...),
		RunCMD:         append(append([]string(nil), o.RunCMD...), in.RunCMD...),
		RHSubscription: o.RHSubscription,
		YumRepos:       o.YumRepos,
		YumRepoDir:     o.YumRepoDir,
	}
	if len(in.RHSubscription) > 0 {
		m.RHSubscription = in.RHSubscription
	}
	if len(in.YumRepos) > 0 {
		repos := map[string]map[string]string{}
		for k, v := range o.YumRepos {
			repos[k] = v
		}
		for k, v := range in.YumRepos {
			repos[k] = v
		}
		m.YumRepos = repos
	}
	if in.YumRepoDir != "" {
		m.YumRepoDir = in.YumRepoDir
	}
	if len(m.BootCMD) == 0 && len(m.RunCMD) == 0 && len(m.RHSubscription) == 0 && len(m.YumRepos) == 0 && m.YumRepoDir == "" {
		return nil
	}
	return m
}
