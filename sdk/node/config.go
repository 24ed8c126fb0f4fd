package node

import (
	"fmt"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// Option is one key of a plugin's configuration: its schema entry and the check of its value.
type Option struct {
	abi.ConfigOption
	// Check validates a value beyond its type and enum (abi.ConfigOption.CheckValue, which runs first); nil
	// accepts anything those allow.
	Check func(value string) error
}

// Keys of the configuration every default plugin accepts.
const (
	KeyCNIVersion      = "cniVersion"
	KeyCNIBaseURL      = "cniBaseURL"
	KeyCRIToolsVersion = "criToolsVersion"
	KeyCRIToolsBaseURL = "criToolsBaseURL"
	KeyJournalMaxUse   = "journaldSystemMaxUse"
)

// Defaults of the common keys. The CNI version is the one upstream OSM's profiles install; the cri-tools
// version follows the kubelet's minor version (cri-tools is released in lockstep with Kubernetes) up to
// LatestCRITools.
const (
	DefaultCNIVersion      = "v1.9.1"
	DefaultCNIBaseURL      = "https://github.com/containernetworking/plugins/releases/download"
	DefaultCRIToolsBaseURL = "https://github.com/kubernetes-sigs/cri-tools/releases/download"
	DefaultJournalMaxUse   = "5G"
	// LatestCRITools is the newest cri-tools minor this plugin version knows to exist; newer kubelets get it.
	LatestCRIToolsMinor = 37
)

// CommonOptions are the keys of every default plugin. Base URLs exist so that air-gapped sites can point every
// download at their own mirror (the Kubernetes binaries follow the controller's -node-binary-base-url).
func CommonOptions() []Option {
	return []Option{
		{ConfigOption: abi.ConfigOption{Name: KeyCNIVersion, Default: DefaultCNIVersion,
			Description: "Version of the CNI reference plugins installed to /opt/cni/bin, e.g. v1.9.1."}, Check: ReleaseVersion},
		{ConfigOption: abi.ConfigOption{Name: KeyCNIBaseURL, Default: DefaultCNIBaseURL,
			Description: "Where the CNI plugins are downloaded from: <url>/<version>/cni-plugins-linux-<arch>-<version>.tgz and .sha256. Point it at a mirror for air-gapped sites."}, Check: BaseURL},
		{ConfigOption: abi.ConfigOption{Name: KeyCRIToolsVersion,
			Description: "Version of cri-tools (crictl), e.g. v1.33.0. Empty: the kubelet's minor version (v<major>.<minor>.0), at most v1.37.0."}, Check: optional(ReleaseVersion)},
		{ConfigOption: abi.ConfigOption{Name: KeyCRIToolsBaseURL, Default: DefaultCRIToolsBaseURL,
			Description: "Where cri-tools is downloaded from: <url>/<version>/crictl-<version>-linux-<arch>.tar.gz and .sha256. Point it at a mirror for air-gapped sites."}, Check: BaseURL},
		{ConfigOption: abi.ConfigOption{Name: KeyJournalMaxUse, Default: DefaultJournalMaxUse,
			Description: "Largest disk space the systemd journal may use (journald SystemMaxUse), e.g. 5G."}, Check: JournalSize},
	}
}

// The checks below are written out rather than as regular expressions: the regexp package alone would add
// about half a megabyte to every plugin module.

// ReleaseVersion accepts a release tag such as v1.9.1.
func ReleaseVersion(v string) error {
	rest, ok := strings.CutPrefix(v, "v")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 3 || !allOf(parts[0], digits) || !allOf(parts[1], digits) || !allOf(parts[2], digits) {
		return fmt.Errorf("%q is not a release version: use e.g. v1.9.1", v)
	}
	return nil
}

// BaseURL accepts an http(s) URL with a host and without query, fragment, white space or quotes; a trailing
// slash is ignored.
func BaseURL(v string) error {
	rest, ok := strings.CutPrefix(v, "https://")
	if !ok {
		rest, ok = strings.CutPrefix(v, "http://")
	}
	host, _, _ := strings.Cut(rest, "/")
	if !ok || host == "" || strings.ContainsAny(v, " \t\r\n'\"\\`$?#") {
		return fmt.Errorf("%q is not an http(s) base URL: use e.g. https://mirror.example.com/path", v)
	}
	return nil
}

// PackageList accepts package names separated by spaces or commas.
func PackageList(v string) error {
	for _, p := range SplitList(v) {
		if !allOf(p, lower+digits+".+_-") || strings.IndexAny(p[:1], lower+digits) != 0 {
			return fmt.Errorf("%q is not a package name: use names such as nfs-common, separated by spaces or commas", p)
		}
	}
	return nil
}

// VersionPattern accepts a package version pattern such as 2.2* (the package manager's glob syntax).
func VersionPattern(v string) error {
	if !allOf(v, lower+upper+digits+".*:~+_-") {
		return fmt.Errorf("%q is not a package version pattern: use e.g. 2.2* or 2.2.1-1", v)
	}
	return nil
}

// JournalSize accepts a journald size such as 5G or 512M.
func JournalSize(v string) error {
	n := strings.TrimRight(v, "KMGT")
	if !allOf(n, digits) || len(v)-len(n) > 1 {
		return fmt.Errorf("%q is not a size such as 5G or 512M", v)
	}
	return nil
}

const (
	digits = "0123456789"
	lower  = "abcdefghijklmnopqrstuvwxyz"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

// allOf reports whether s is non-empty and made of the characters in set.
func allOf(s, set string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune(set, r) {
			return false
		}
	}
	return true
}

// SplitList splits a space or comma separated list, dropping empty items.
func SplitList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

func optional(check func(string) error) func(string) error {
	return func(v string) error {
		if v == "" {
			return nil
		}
		return check(v)
	}
}

// Schema returns the options' schema entries, for the plugin metadata.
func Schema(opts []Option) []abi.ConfigOption {
	out := make([]abi.ConfigOption, 0, len(opts))
	for _, o := range opts {
		out = append(out, o.ConfigOption)
	}
	return out
}

// CheckConfig validates a plugin configuration against opts: unknown keys, values outside an enum and values
// their check refuses each give a FieldError naming spec.plugin.config.<key>, in key order.
func CheckConfig(opts []Option, config map[string]string) []abi.FieldError {
	byName := make(map[string]Option, len(opts))
	var names []string
	for _, o := range opts {
		byName[o.Name] = o
		if o.Type != abi.ConfigSecret {
			names = append(names, o.Name)
		}
	}
	var errs []abi.FieldError
	for _, k := range abi.SortedKeys(config) {
		field := "spec.plugin.config." + k
		o, ok := byName[k]
		v := config[k]
		switch {
		case !ok:
			errs = append(errs, abi.FieldError{Field: field, Message: fmt.Sprintf("unknown setting; this plugin accepts %s", strings.Join(names, ", "))})
		case o.Type == abi.ConfigSecret:
			errs = append(errs, abi.FieldError{Field: field, Message: "a secret: provide it in spec.plugin.secrets (a Secret reference), never as plain config"})
		default:
			if err := o.CheckValue(v); err != nil {
				errs = append(errs, abi.FieldError{Field: field, Message: err.Error()})
			} else if o.Check != nil {
				if err := o.Check(v); err != nil {
					errs = append(errs, abi.FieldError{Field: field, Message: err.Error()})
				}
			}
		}
	}
	return errs
}

// WithDefaults returns config with the options' defaults filled in for keys that are not set, which is what
// the host does before calling the plugin; doing it again here makes the plugin correct when called with a
// bare config (tests, other hosts).
func WithDefaults(opts []Option, config map[string]string) map[string]string {
	out := make(map[string]string, len(opts))
	for _, o := range opts {
		if o.Default != "" {
			out[o.Name] = o.Default
		}
	}
	for k, v := range config {
		out[k] = v
	}
	return out
}
