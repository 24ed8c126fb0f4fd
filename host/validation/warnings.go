package validation

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// Warnings returns what is legal in osp but unsafe, each naming its field. The admission webhook returns them
// as admission warnings (kubectl prints them) and `osmctl lint` prints them; neither rejects the profile, since
// upstream's own profiles fetch their credentials with curl -k.
func Warnings(osp *osmv1alpha1.OperatingSystemProfile) []string {
	spec := field.NewPath("spec")
	out := sectionWarnings(&osp.Spec.BootstrapConfig, spec.Child("bootstrapConfig"))
	return append(out, sectionWarnings(&osp.Spec.ProvisioningConfig, spec.Child("provisioningConfig"))...)
}

func sectionWarnings(cfg *osmv1alpha1.OSPConfig, p *field.Path) []string {
	var out []string
	check := func(f *field.Path, text string) {
		for _, what := range insecureFetches(text) {
			out = append(out, fmt.Sprintf("%s: %s turns off TLS certificate verification, so whoever can intercept the "+
				"download can replace what the node runs; verify against a CA instead (curl --cacert, wget --ca-certificate)", f, what))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Templates)) {
		check(p.Child("templates").Key(name), cfg.Templates[name])
	}
	checkFiles := func(files []osmv1alpha1.File, fp *field.Path) {
		for i, f := range files {
			if f.Content.Inline != nil {
				check(fp.Index(i).Child("content", "inline", "data"), f.Content.Inline.Data)
			}
		}
	}
	checkFiles(cfg.Files, p.Child("files"))
	for i, cr := range cfg.SupportedContainerRuntimes {
		cp := p.Child("supportedContainerRuntimes").Index(i)
		for _, name := range slices.Sorted(maps.Keys(cr.Templates)) {
			check(cp.Child("templates").Key(name), cr.Templates[name])
		}
		checkFiles(cr.Files, cp.Child("files"))
	}
	for i, u := range cfg.Units {
		up := p.Child("units").Index(i)
		if u.Content != nil {
			check(up.Child("content"), *u.Content)
		}
		for j, d := range u.DropIns {
			check(up.Child("dropIns").Index(j).Child("content"), d.Content)
		}
	}
	if m := cfg.CloudInitModules; m != nil {
		for i, c := range m.BootCMD {
			check(p.Child("cloudInitModules", "bootcmd").Index(i), c)
		}
		for i, c := range m.RunCMD {
			check(p.Child("cloudInitModules", "runcmd").Index(i), c)
		}
	}
	return out
}

var (
	templateAction = regexp.MustCompile(`(?s)\{\{.*?\}\}`)
	// commandSeparator splits shell text into simple commands: lines (a backslash continues one), pipes, lists.
	commandSeparator = regexp.MustCompile(`\|\||&&|[|;&\n]`)
	curlShortK       = regexp.MustCompile(`^-[a-zA-Z]*k[a-zA-Z]*$`)
)

// insecureFetches finds curl and wget commands that skip certificate verification in shell text (a script, a
// unit's ExecStart, a runcmd entry). Template actions are blanked first, so that {{ if .X }}-k{{ end }} counts.
func insecureFetches(text string) []string {
	if !strings.Contains(text, "curl") && !strings.Contains(text, "wget") {
		return nil
	}
	text = templateAction.ReplaceAllString(text, " ")
	text = strings.ReplaceAll(text, "\\\n", " ")
	var found []string
	seen := map[string]bool{}
	for _, command := range commandSeparator.Split(text, -1) {
		words := strings.Fields(command)
		atCommand := true
		for i, w := range words {
			// A command substitution starts a command inside a word: x=$(curl ...), `curl ...`.
			if k := max(strings.LastIndex(w, "$("), strings.LastIndex(w, "`")); k >= 0 {
				w, atCommand = strings.TrimLeft(w[k:], "$(`"), true
			}
			if !atCommand || w == "" || commandPrefixes[w] || assignment.MatchString(w) {
				continue
			}
			atCommand = false
			tool := path.Base(strings.Trim(w, `"'(`))
			if tool != "curl" && tool != "wget" {
				continue
			}
			for _, what := range insecureFlags(tool, words[i+1:]) {
				if !seen[what] {
					seen[what] = true
					found = append(found, what)
				}
			}
		}
	}
	return found
}

// commandPrefixes run the command that follows them.
var commandPrefixes = map[string]bool{"sudo": true, "env": true, "exec": true, "command": true, "nohup": true, "time": true}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func insecureFlags(tool string, args []string) []string {
	var out []string
	for _, arg := range args {
		arg = strings.Trim(arg, `"')`+"`")
		switch {
		case tool == "curl" && (arg == "--insecure" || arg == "--proxy-insecure"):
			out = append(out, "curl "+arg)
		case tool == "curl" && curlShortK.MatchString(arg):
			out = append(out, "curl -k")
		case tool == "wget" && arg == "--no-check-certificate":
			out = append(out, "wget --no-check-certificate")
		}
	}
	return out
}
