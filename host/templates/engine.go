package templates

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/template"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/nodeconfig"
	"github.com/osmhq/osm/sdk/abi"
)

// RenderStage renders one section of a profile (bootstrapConfig or provisioningConfig) for a container
// runtime, with upstream OSM's semantics so that upstream profiles produce the same files:
//
//   - the files of the matching supportedContainerRuntimes entry are appended to the section's files, and its
//     templates are available next to the section's own (which win on a name clash);
//   - every named template is executed on its own first, and its output is what {{ template "x" }} inserts,
//     with trailing whitespace trimmed and a leading newline;
//   - every file's content is a template; files without permissions get 644;
//   - units and cloud-init modules are copied as they are.
//
// The templates run within DefaultLimits (or those of WithLimits) and stop when ctx ends (the reconcile's or
// the admission request's).
// section names the section in errors ("provisioningConfig"); errors also name the file or template and the
// line, so an operator can find the problem in the profile.
func RenderStage(ctx context.Context, section string, cfg *osmv1alpha1.OSPConfig, containerRuntime string, data any) (*abi.NodeConfig, error) {
	lim, ok := ctx.Value(limitsKey{}).(Limits)
	if !ok {
		lim = DefaultLimits()
	}
	return renderStage(ctx, lim, section, cfg, containerRuntime, data)
}

type limitsKey struct{}

// WithLimits returns a context under which RenderStage uses lim instead of DefaultLimits. The render path
// (host/render, the admission webhook's trial render, osmctl) passes its context through, so a test can render
// real profiles under tighter limits to measure their headroom.
func WithLimits(ctx context.Context, lim Limits) context.Context {
	return context.WithValue(ctx, limitsKey{}, lim)
}

func renderStage(ctx context.Context, lim Limits, section string, cfg *osmv1alpha1.OSPConfig, containerRuntime string, data any) (*abi.NodeConfig, error) {
	b := newBudget(ctx, lim)
	defer b.close()
	return b.renderStage(section, cfg, containerRuntime, data)
}

// Stage is the template budget of one stage of one render: the profile's templates and every extension's
// templates of that stage execute within it, one after the other, so that together they get the steps, work,
// output and time of one stage (Limits), not each their own. Without it, n extensions each within the limits
// built n times a stage's output: 25 extensions built 100 MB of user-data before the final size check.
// A Stage is used by one goroutine; Close releases its timer.
type Stage struct{ b *budget }

// NewStage starts the budget of a stage, with the Limits of ctx (WithLimits, else DefaultLimits). maxOutput,
// when positive and lower, replaces Limits.StageOutputBytes: the caller's bound on the whole stage (the
// user-data size limit, with room for compression), enforced while the templates print instead of after.
func NewStage(ctx context.Context, maxOutput int) *Stage {
	lim, ok := ctx.Value(limitsKey{}).(Limits)
	if !ok {
		lim = DefaultLimits()
	}
	if maxOutput > 0 && maxOutput < lim.StageOutputBytes {
		lim.StageOutputBytes = maxOutput
	}
	return &Stage{b: newBudget(ctx, lim)}
}

// Render renders one section (a profile's, or an extension's part of the stage) within the stage's budget,
// as RenderStage does.
func (s *Stage) Render(section string, cfg *osmv1alpha1.OSPConfig, containerRuntime string, data any) (*abi.NodeConfig, error) {
	return s.b.renderStage(section, cfg, containerRuntime, data)
}

// Close releases the stage's timer.
func (s *Stage) Close() { s.b.close() }

func (b *budget) renderStage(section string, cfg *osmv1alpha1.OSPConfig, containerRuntime string, data any) (*abi.NodeConfig, error) {
	files := append([]osmv1alpha1.File(nil), cfg.Files...)
	named := map[string]string{}
	for _, cr := range cfg.SupportedContainerRuntimes {
		if string(cr.Name) != containerRuntime {
			continue
		}
		files = append(files, cr.Files...)
		maps.Copy(named, cr.Templates)
		break
	}
	maps.Copy(named, cfg.Templates)
	defines, err := b.renderNamed(section, named, data)
	if err != nil {
		return nil, err
	}
	var shared *template.Template
	if len(files) > 0 || len(defines) > 0 {
		if shared, err = b.sharedSet(section, defines); err != nil {
			return nil, err
		}
	}
	out := &abi.NodeConfig{}
	for i, f := range files {
		content, err := b.renderFile(f, shared, defines, data)
		if err != nil {
			return nil, &FieldError{Field: fileField(section, i, len(cfg.Files), containerRuntime), Path: f.Path, Err: err}
		}
		perm := nodeconfig.DefaultPermissions
		if f.Permissions != nil && *f.Permissions != 0 {
			perm = *f.Permissions
		}
		enc := ""
		if f.Content.Inline != nil {
			enc = f.Content.Inline.Encoding
		}
		out.Files = append(out.Files, abi.File{
			Path:        f.Path,
			Permissions: &perm,
			Content:     abi.FileContent{Inline: &abi.FileContentInline{Encoding: enc, Data: content}},
		})
	}
	out.Units = convertUnits(cfg.Units)
	out.Modules = convertModules(cfg.CloudInitModules)
	return out, nil
}

// CheckSyntax parses a template with the functions profile templates can call, without executing it.
func CheckSyntax(name, src string) error {
	if err := checkNesting(src, DefaultLimits().Nesting); err != nil {
		return fmt.Errorf("template: %s: %w", name, err)
	}
	_, err := template.New(name).Funcs(parseFuncs).Parse(src)
	return err
}

// FieldError is a template that failed to parse or execute, with the profile field it comes from.
type FieldError struct {
	// Field is the path of the template in the profile, e.g. spec.provisioningConfig.files[3].content.inline.data.
	Field string
	// Path is the file's path on the node, when the template is a file's content.
	Path string
	Err  error
}

func (e *FieldError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%s (%s): %v", e.Field, e.Path, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Field, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

// fileField names the i-th merged file: the section's own files come first, then the container runtime's.
func fileField(section string, i, own int, runtime string) string {
	if i < own {
		return fmt.Sprintf("%s.files[%d].content.inline.data", section, i)
	}
	return fmt.Sprintf("%s.supportedContainerRuntimes[%s].files[%d].content.inline.data", section, runtime, i-own)
}

// renderNamed executes each named template on its own and wraps the output in a define, the way upstream
// does. Names are processed in order so errors are reported deterministically.
func (b *budget) renderNamed(section string, named map[string]string, data any) ([]string, error) {
	names := slices.Sorted(maps.Keys(named))
	defines := make([]string, 0, len(names))
	for _, name := range names {
		where := fmt.Sprintf("%s.templates[%s]", section, name)
		t, err := b.parse(b.newSet(name), named[name])
		if err != nil {
			return nil, &FieldError{Field: where, Err: err}
		}
		out, err := b.execute(t, data)
		if err != nil {
			return nil, &FieldError{Field: where, Err: err}
		}
		defines = append(defines, fmt.Sprintf("\n{{- define %q }}\n%s\n{{- end }}", name, out))
	}
	return defines, nil
}

// sharedSet parses the named templates once per stage into a set every file template joins, so each file costs
// one parse instead of one parse plus one per named template, and the function map is copied once, not per file.
func (b *budget) sharedSet(section string, defines []string) (*template.Template, error) {
	set := b.newSet(section)
	for _, d := range defines {
		if _, err := b.parse(set, d); err != nil {
			return nil, &FieldError{Field: section + ".templates", Err: fmt.Errorf("a named template's output does not parse: %w", err)}
		}
	}
	return set, nil
}

// definesTemplates reports whether a file's template defines templates of its own. Such a file gets a set of
// its own, as upstream gives every file, so its definitions cannot leak into other files.
func definesTemplates(src string) bool { return defineAction.MatchString(src) }

var defineAction = regexp.MustCompile(`\{\{-?\s*(define|block)\b`)

func (b *budget) renderFile(f osmv1alpha1.File, shared *template.Template, defines []string, data any) (string, error) {
	src := ""
	if f.Content.Inline != nil {
		src = f.Content.Inline.Data
	}
	if !definesTemplates(src) {
		t, err := b.parse(shared.New(f.Path), src)
		if err != nil {
			return "", err
		}
		return b.execute(t, data)
	}
	t, err := b.parse(b.newSet(f.Path), src)
	if err != nil {
		return "", err
	}
	for _, d := range defines {
		if _, err = b.parse(t, d); err != nil {
			return "", fmt.Errorf("a named template's output does not parse: %w", err)
		}
	}
	return b.execute(t, data)
}

// trimExecError drops the long data dump text/template appends to some errors, keeping name:line:col.
func trimExecError(err error) error {
	msg := err.Error()
	if i := strings.Index(msg, " for data "); i > 0 {
		return fmt.Errorf("%s", msg[:i])
	}
	return err
}

func convertUnits(units []osmv1alpha1.Unit) []abi.Unit {
	out := make([]abi.Unit, 0, len(units))
	for _, u := range units {
		au := abi.Unit{Name: u.Name, Enable: u.Enable, Mask: u.Mask, Content: u.Content}
		for _, d := range u.DropIns {
			au.DropIns = append(au.DropIns, abi.DropIn{Name: d.Name, Content: d.Content})
		}
		out = append(out, au)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func convertModules(m *osmv1alpha1.CloudInitModule) *abi.Modules {
	if m == nil {
		return nil
	}
	return &abi.Modules{
		BootCMD:        append([]string(nil), m.BootCMD...),
		RunCMD:         append([]string(nil), m.RunCMD...),
		RHSubscription: maps.Clone(m.RHSubscription),
		YumRepos:       copyRepos(m.YumRepos),
		YumRepoDir:     m.YumRepoDir,
	}
}

func copyRepos(m map[string]map[string]string) map[string]map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]map[string]string, len(m))
	for k, v := range m {
		out[k] = maps.Clone(v)
	}
	return out
}
