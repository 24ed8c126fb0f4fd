package containerd

import (
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// HostsFile is one certs.d/<Dir>/hosts.toml.
type HostsFile struct {
	// Dir is the directory under CertsDir: the registry host[:port], or "_default" for the catch-all.
	Dir     string
	Path    string
	Content string
}

// Names containerd gives the catch-all directory and Docker Hub's real API host.
const (
	defaultDir     = "_default"
	dockerHub      = "docker.io"
	dockerHubAPI   = "https://registry-1.docker.io"
	wildcard       = "*"
	markerParam    = "kubermatic"
	markerOverride = "override_path"
)

// endpoint is one [host."..."] table: a mirror, with the OSM marker taken out of its URL.
type endpoint struct {
	url          string
	overridePath bool
}

type registryHosts struct {
	endpoints []endpoint
	insecure  bool
}

// hostsDoc and hostEntry are the hosts.toml fields OSM writes, in the order upstream writes them.
type hostsDoc struct {
	Server string               `toml:"server,omitempty"`
	Host   map[string]hostEntry `toml:"host,omitempty"`
}

type hostEntry struct {
	Capabilities []string `toml:"capabilities"`
	SkipVerify   bool     `toml:"skip_verify,omitempty"`
	OverridePath bool     `toml:"override_path,omitempty"`
}

// HostsFiles returns the hosts.toml files for the options, sorted by path. docker.io always gets one (its
// default upstream is registry-1.docker.io); every other registry gets one when it has mirrors or is insecure.
//
// As upstream does: a registry's mirrors replace docker.io's default entry; mirrors of "*" or "_default" go to
// certs.d/_default without a server line, so containerd falls back to the pulled registry itself; the marker
// ?kubermatic=override_path%3Dtrue is removed from a mirror's URL and becomes override_path = true (the mirror
// URL is then the full API path, as a Harbor proxy cache needs); an insecure registry's hosts all skip TLS
// verification, and without mirrors it is its own host. Mirrors are written in the order of their URLs (a TOML
// table's keys are sorted), which is the order containerd tries them. When two registries share a directory
// ("*" and "_default", or "r.io" and "r.io/sub"), the one that sorts last wins.
func HostsFiles(opts Options) ([]HostsFile, error) {
	mirrors, err := opts.mirrorsByRegistry()
	if err != nil {
		return nil, err
	}
	regs := map[string]*registryHosts{dockerHub: {endpoints: []endpoint{{url: dockerHubAPI}}}}
	get := func(name string) *registryHosts {
		if regs[name] == nil {
			regs[name] = &registryHosts{}
		}
		return regs[name]
	}
	for name, urls := range mirrors {
		r := get(name)
		r.endpoints = nil
		for _, u := range urls {
			r.endpoints = append(r.endpoints, parseEndpoint(u))
		}
	}
	for _, name := range opts.InsecureRegistries {
		get(name).insecure = true
	}

	names := make([]string, 0, len(regs))
	for name := range regs {
		names = append(names, name)
	}
	sort.Strings(names)
	byPath := map[string]HostsFile{}
	for _, name := range names {
		r := regs[name]
		if len(r.endpoints) == 0 && !r.insecure {
			continue
		}
		dir, server := location(name)
		content, err := r.encode(server)
		if err != nil {
			return nil, err
		}
		path := CertsDir + "/" + dir + "/hosts.toml"
		byPath[path] = HostsFile{Dir: dir, Path: path, Content: content}
	}
	out := make([]HostsFile, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// location is the certs.d directory of a registry and the server line of its file. Containerd names the
// directory by host[:port] only; Docker Hub's API lives on another host than its name; the catch-all has no
// single upstream, so no server line, and containerd then falls back to whichever registry is pulled from.
func location(registry string) (dir, server string) {
	dir, _, _ = strings.Cut(registry, "/")
	switch dir {
	case dockerHub:
		return dir, dockerHubAPI
	case wildcard, defaultDir:
		return defaultDir, ""
	default:
		return dir, registry
	}
}

func (r *registryHosts) encode(server string) (string, error) {
	doc := hostsDoc{Server: server, Host: map[string]hostEntry{}}
	for _, e := range r.endpoints {
		doc.Host[e.url] = hostEntry{Capabilities: []string{"pull", "resolve"}, SkipVerify: r.insecure, OverridePath: e.overridePath}
	}
	if len(r.endpoints) == 0 {
		// An insecure registry without mirrors is its own host.
		doc.Host[server] = hostEntry{Capabilities: []string{"pull", "resolve"}, SkipVerify: true}
	}
	var buf strings.Builder
	enc := toml.NewEncoder(&buf)
	enc.Indent = ""
	if err := enc.Encode(doc); err != nil {
		return "", err
	}
	// The encoder opens the parent table [host] before its [host."..."] tables; containerd does not need it
	// and upstream's files do not have it.
	return strings.ReplaceAll(buf.String(), "[host]\n", ""), nil
}

// parseEndpoint reads upstream OSM's marker from a mirror URL: a query parameter kubermatic whose value is
// itself a query-encoded list of settings, of which override_path=<bool> is the one containerd knows. The
// marker is removed from the URL containerd gets (other query parameters stay, re-encoded); a URL that does
// not parse, or a marker that does not, is kept as given with override_path off.
func parseEndpoint(raw string) endpoint {
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{url: raw}
	}
	query := u.Query()
	if !query.Has(markerParam) {
		return endpoint{url: raw}
	}
	var e endpoint
	if settings, err := url.QueryUnescape(query.Get(markerParam)); err == nil {
		if values, err := url.ParseQuery(settings); err == nil {
			e.overridePath, _ = strconv.ParseBool(values.Get(markerOverride))
		}
	}
	query.Del(markerParam)
	u.RawQuery = query.Encode()
	e.url = u.String()
	return e
}
