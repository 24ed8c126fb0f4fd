package containerd

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// RegistryFlags binds upstream OSM's containerd flags (the three registry flags and
// -device-ownership-from-security-context), with upstream's names and syntax, so the controller and osmctl read
// them the same way.
type RegistryFlags struct {
	insecure          string
	mirrors           string
	containerdMirrors MirrorFlag
	deviceOwnership   bool
}

// AddFlags registers -node-insecure-registries, -node-registry-mirrors and -node-containerd-registry-mirrors.
func (f *RegistryFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.insecure, "node-insecure-registries", "", "Comma-separated registries containerd reaches without verifying TLS.")
	fs.StringVar(&f.mirrors, "node-registry-mirrors", "", "Comma-separated mirrors: mirror-URL (of docker.io) or registry=mirror-URL; https:// is added when no scheme is given.")
	fs.Var(&f.containerdMirrors, "node-containerd-registry-mirrors", "Mirror for a registry, as registry=mirror-URL; repeat the flag for more. "+
		"Registry * or _default is the catch-all. Append ?kubermatic=override_path%3Dtrue to a mirror URL that is the full API path (e.g. a Harbor proxy cache).")
	fs.BoolVar(&f.deviceOwnership, "device-ownership-from-security-context", false, "Let containerd give containers' devices the container's UID/GID (non-root device use).")
}

// Apply sets the registry fields of opts from the parsed flags, and fails on a mirror that is not a URL, as
// upstream does at start.
func (f *RegistryFlags) Apply(opts *Options) error {
	opts.InsecureRegistries = splitList(f.insecure)
	opts.RegistryMirrors = splitList(f.mirrors)
	opts.ContainerdRegistryMirrors = f.containerdMirrors.copy()
	opts.DeviceOwnershipFromSecurityContext = f.deviceOwnership
	_, err := opts.mirrorsByRegistry()
	return err
}

// MirrorFlag collects -node-containerd-registry-mirrors values. Each value is one registry=mirror pair, split at
// the first "=": the mirror is taken whole (a comma is part of it) and without a scheme added, as upstream does.
type MirrorFlag struct{ m map[string][]string }

func (f *MirrorFlag) String() string {
	if f == nil {
		return ""
	}
	keys := make([]string, 0, len(f.m))
	for k := range f.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		for _, v := range f.m[k] {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

// Set adds one registry=mirror pair. Upstream also takes an empty registry or mirror and writes a hosts.toml
// containerd cannot use; those are refused here, naming the value.
func (f *MirrorFlag) Set(v string) error {
	reg, mirror, ok := strings.Cut(v, "=")
	switch {
	case !ok:
		return fmt.Errorf("%q is not registry=mirror", v)
	case reg == "":
		return fmt.Errorf("%q has no registry before =", v)
	case mirror == "":
		return fmt.Errorf("%q has no mirror after =", v)
	}
	if f.m == nil {
		f.m = map[string][]string{}
	}
	f.m[reg] = append(f.m[reg], mirror)
	return nil
}

func (f *MirrorFlag) copy() map[string][]string {
	if len(f.m) == 0 {
		return nil
	}
	out := make(map[string][]string, len(f.m))
	for k, v := range f.m {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// mirrorEntry is a -node-registry-mirrors entry of the form registry=mirror; the registry is a plain host name
// (no port, no path), so anything else is a docker.io mirror.
var mirrorEntry = regexp.MustCompile(`^([a-zA-Z0-9.-]+)=(.*)`)

// mirrorsByRegistry merges the two mirror flags as upstream does: each -node-registry-mirrors entry is a mirror
// of docker.io unless it names its registry, gets https:// when it does not start with "http", and is added
// after that registry's -node-containerd-registry-mirrors values.
func (o Options) mirrorsByRegistry() (map[string][]string, error) {
	out := make(map[string][]string, len(o.ContainerdRegistryMirrors)+1)
	for reg, mirrors := range o.ContainerdRegistryMirrors {
		out[reg] = append([]string(nil), mirrors...)
	}
	var errs []error
	for _, entry := range o.RegistryMirrors {
		reg, mirror := dockerHub, entry
		if m := mirrorEntry.FindStringSubmatch(entry); m != nil {
			reg, mirror = m[1], m[2]
		}
		if !strings.HasPrefix(mirror, "http") {
			mirror = "https://" + mirror
		}
		if _, err := url.Parse(mirror); err != nil {
			errs = append(errs, fmt.Errorf("-node-registry-mirrors: %q is not a URL: %w", entry, err))
			continue
		}
		out[reg] = append(out[reg], mirror)
	}
	return out, errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
