package cloudinit

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// Modules adds bootcmd, runcmd, rh_subscription and the yum repositories.
func Modules(doc *Document, cfg *abi.NodeConfig) error {
	m := cfg.Modules
	if m == nil {
		return nil
	}
	doc.BootCMD = append(doc.BootCMD, m.BootCMD...)
	doc.RunCMD = append(doc.RunCMD, m.RunCMD...)
	doc.YumRepoDir = m.YumRepoDir
	if len(m.YumRepos) > 0 {
		repos, err := yumRepos(m.YumRepos)
		if err != nil {
			return err
		}
		doc.YumRepos = repos
	}
	if len(m.RHSubscription) > 0 {
		sub, err := rhSubscription(m.RHSubscription)
		if err != nil {
			return err
		}
		doc.RHSubscription = sub
	}
	return nil
}

// rhSubscription converts the profile's string map to the types cloud-init's rh_subscription schema declares:
// booleans for auto-attach, lists for the pool and repository keys, strings for the rest.
func rhSubscription(in map[string]string) (map[string]any, error) {
	out := make(map[string]any, len(in))
	for k, v := range in {
		switch k {
		case "auto-attach":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("modules.rh_subscription.auto-attach: %q is not a boolean", v)
			}
			out[k] = b
		case "add-pool", "enable-repo", "disable-repo":
			var items []string
			for _, item := range strings.Split(v, ",") {
				if item = strings.TrimSpace(item); item != "" {
					items = append(items, item)
				}
			}
			out[k] = items
		default:
			out[k] = v
		}
	}
	return out, nil
}

// yumRepos converts the profile's string map to the types cloud-init's yum_repos schema declares: "enabled"
// is a boolean ("1", "true", "0", "false" are accepted), every other key stays a string.
func yumRepos(in map[string]map[string]string) (map[string]map[string]any, error) {
	out := make(map[string]map[string]any, len(in))
	for name, repo := range in {
		r := make(map[string]any, len(repo))
		for k, v := range repo {
			if k != "enabled" {
				r[k] = v
				continue
			}
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("modules.yum_repos.%s.enabled: %q is not a boolean", name, v)
			}
			r[k] = b
		}
		out[name] = r
	}
	return out, nil
}
