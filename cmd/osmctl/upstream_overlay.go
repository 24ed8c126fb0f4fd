package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// controllerFlags is osm-controller's flag list (name, bool or value, role), kept equal to the controller's
// flags by TestControllerFlagList in cmd/osm-controller.
//
//go:embed controller-flags.txt
var controllerFlags string

// The Deployment deploy/ installs, and the controller binary in OSM's image (upstream's path too).
const (
	overlayNamespace  = "kube-system"
	overlayDeployment = "operating-system-manager"
	controllerBinary  = "/usr/local/bin/osm-controller"
	overlayComponent  = "upstream-flags"
)

type overlayOptions struct {
	file, deploy, out string
}

func newUpstreamOverlayCommand() *cobra.Command {
	o := &overlayOptions{}
	cmd := &cobra.Command{
		Use:   "upstream-overlay -f live-deployment.yaml -o DIR [--deploy deploy/]",
		Short: "Write a kustomization that installs OSM's deploy/ over upstream OSM's Deployment and keeps its arguments.",
		Long: `upstream-overlay reads the Deployment upstream OSM runs (kubectl get -o yaml of
kube-system/operating-system-manager) and writes DIR/kustomization.yaml: OSM's deploy/ with the Deployment's
container taking the name of upstream's (so the apply updates that container instead of adding a second one),
OSM's binary as its command, and as its arguments every argument of upstream's container, in order, followed
by those of deploy/'s that set how the controller itself runs and that upstream's do not set. Node settings
(-cluster-dns, -node-*, -pause-image, ...) are never taken from deploy/: a node setting upstream's arguments do
not give keeps upstream's default, which is OSM's. An argument osm-controller does not know is left out (the
controller would refuse to start with it) and named; those it accepts without effect are kept and named.

Apply with kubectl apply -k DIR. Further components of deploy/ (webhooks) go after upstream-flags in
DIR/kustomization.yaml's components.`,
		Example: `  kubectl -n kube-system get deployment operating-system-manager -o yaml > upstream-deployment.yaml
  osmctl upstream-overlay -f upstream-deployment.yaml --deploy deploy/ -o osm-over-upstream/
  kubectl apply -k osm-over-upstream/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.InOrStdin(), cmd.OutOrStdout()) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "filename", "f", "", "The live Deployment, as kubectl get -o yaml prints it; - reads stdin (required).")
	f.StringVar(&o.deploy, "deploy", "deploy", "OSM's deploy/ directory.")
	f.StringVarP(&o.out, "output-dir", "o", "", "Directory to write the kustomization to (required).")
	for _, name := range []string{"filename", "output-dir"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func (o *overlayOptions) run(in io.Reader, out io.Writer) error {
	live, err := readDeployment(o.file, in)
	if err != nil {
		return err
	}
	if live.Namespace != overlayNamespace || live.Name != overlayDeployment {
		return fmt.Errorf("%s is Deployment %s/%s; deploy/ replaces %s/%s", o.file, live.Namespace, live.Name, overlayNamespace, overlayDeployment)
	}
	container, err := controllerContainer(live)
	if err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	base, err := readDeployment(filepath.Join(o.deploy, "deployment.yaml"), nil)
	if err != nil {
		return fmt.Errorf("--deploy: %w", err)
	}
	if len(base.Spec.Template.Spec.Containers) == 0 {
		return fmt.Errorf("--deploy: %s has no container", filepath.Join(o.deploy, "deployment.yaml"))
	}
	known := parseFlagList(controllerFlags)
	upstream := parseArgs(upstreamArgs(container), known)
	additions := parseArgs(base.Spec.Template.Spec.Containers[0].Args, known)
	args, report := mergeArgs(upstream, additions)
	if err := o.write(container.Name, args); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(out, "wrote %s (kubectl apply -k %s)\n", filepath.Join(o.out, "kustomization.yaml"), o.out)
	for _, line := range report {
		_, _ = fmt.Fprintln(out, line)
	}
	return nil
}

// readDeployment reads a Deployment from path, or from stdin when path is "-".
func readDeployment(path string, stdin io.Reader) (*appsv1.Deployment, error) {
	var data []byte
	var err error
	if path == "-" && stdin != nil {
		data, err = io.ReadAll(io.LimitReader(stdin, 4<<20))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	d := &appsv1.Deployment{}
	if err := yaml.Unmarshal(data, d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if d.Kind != "Deployment" {
		return nil, fmt.Errorf("%s is a %q, not a Deployment", path, d.Kind)
	}
	return d, nil
}

// controllerContainer is the container that runs the controller: the one whose command is osm-controller,
// else upstream's container name, else the only one.
func controllerContainer(d *appsv1.Deployment) (*corev1.Container, error) {
	cs := d.Spec.Template.Spec.Containers
	for i := range cs {
		if len(cs[i].Command) > 0 && filepath.Base(cs[i].Command[0]) == "osm-controller" {
			return &cs[i], nil
		}
	}
	for i := range cs {
		if cs[i].Name == overlayDeployment {
			return &cs[i], nil
		}
	}
	if len(cs) == 1 {
		return &cs[0], nil
	}
	return nil, fmt.Errorf("no container runs osm-controller among %d", len(cs))
}

// upstreamArgs are the controller's arguments: its command's after the binary, then its args.
func upstreamArgs(c *corev1.Container) []string {
	var args []string
	if len(c.Command) > 0 {
		args = append(args, c.Command[1:]...)
	}
	return append(args, c.Args...)
}

// flagInfo is a line of controller-flags.txt.
type flagInfo struct {
	isBool bool
	role   string
}

func parseFlagList(s string) map[string]flagInfo {
	known := map[string]flagInfo{}
	for _, line := range strings.Split(s, "\n") {
		fields := strings.Split(line, "\t")
		if strings.HasPrefix(line, "#") || len(fields) != 3 {
			continue
		}
		known[fields[0]] = flagInfo{isBool: fields[1] == "bool", role: fields[2]}
	}
	return known
}

// arg is one flag as given: its name and its tokens (-name=value, or -name value).
type arg struct {
	name   string
	tokens []string
	known  bool
	info   flagInfo
}

// parseArgs splits arguments into flags the way Go's flag package reads them: -name, --name, -name=value, or
// -name value for a flag that is not boolean. Parsing stops at "--" or the first argument that is not a flag,
// as Go's does; what follows is returned as one unknown argument.
func parseArgs(tokens []string, known map[string]flagInfo) []arg {
	var out []arg
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		if tok == "--" || len(tok) < 2 || tok[0] != '-' {
			return append(out, arg{name: strings.Join(tokens[i:], " "), tokens: tokens[i:]})
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(tok, "-"), "=")
		info, ok := known[name]
		a := arg{name: name, tokens: []string{tok}, known: ok, info: info}
		// A flag's value in the next argument: known non-boolean flags, and unknown ones followed by a non-flag.
		takesNext := !hasValue && i+1 < len(tokens) && ((ok && !info.isBool) || (!ok && !strings.HasPrefix(tokens[i+1], "-")))
		if takesNext {
			a.tokens = append(a.tokens, tokens[i+1])
			i++
		}
		out = append(out, a)
	}
	return out
}

// mergeArgs returns upstream's known arguments, in order, then deploy/'s controller arguments upstream does not
// set, and a report of what was kept, left out and added.
func mergeArgs(upstream, additions []arg) ([]string, []string) {
	var args, report []string
	set := map[string]bool{}
	for _, a := range upstream {
		switch {
		case !a.known:
			report = append(report, fmt.Sprintf("left out:  %s (osm-controller has no such flag and would not start with it)", strings.Join(a.tokens, " ")))
			continue
		case a.info.role == "ignored":
			report = append(report, fmt.Sprintf("kept:      %s (accepted and ignored by osm-controller; it logs so at start)", strings.Join(a.tokens, " ")))
		default:
			report = append(report, "kept:      "+strings.Join(a.tokens, " "))
		}
		set[a.name] = true
		args = append(args, a.tokens...)
	}
	for _, a := range additions {
		switch {
		case set[a.name]:
		case !a.known:
			report = append(report, fmt.Sprintf("not added: %s (deploy/ argument osm-controller does not know)", strings.Join(a.tokens, " ")))
		case a.info.role == "node":
			report = append(report, fmt.Sprintf("not added: %s (a node setting: upstream's default, which is OSM's, stays)", strings.Join(a.tokens, " ")))
		default:
			report = append(report, "added:     "+strings.Join(a.tokens, " ")+" (from deploy/)")
			args = append(args, a.tokens...)
		}
	}
	return args, report
}

// write writes DIR/kustomization.yaml (deploy/ plus the component) and the component DIR/upstream-flags.
func (o *overlayOptions) write(container string, args []string) error {
	abs, err := filepath.Abs(o.out)
	if err != nil {
		return err
	}
	deploy, err := filepath.Abs(o.deploy)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(abs, deploy)
	if err != nil {
		return err
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	const c0 = "/spec/template/spec/containers/0/"
	patch, err := yaml.Marshal([]op{
		{"replace", c0 + "name", container},
		{"add", c0 + "command", []string{controllerBinary}},
		{"add", c0 + "args", args},
	})
	if err != nil {
		return err
	}
	component := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1alpha1",
		"kind":       "Component",
		"patches": []map[string]any{{
			"target": map[string]string{"group": "apps", "version": "v1", "kind": "Deployment", "name": overlayDeployment, "namespace": overlayNamespace},
			"patch":  string(patch),
		}},
	}
	kustomization := map[string]any{
		"resources":  []string{filepath.ToSlash(rel)},
		"components": []string{overlayComponent},
	}
	head := "# Written by osmctl upstream-overlay from " + o.file + ": OSM's deploy/ over upstream OSM's Deployment, keeping its arguments.\n"
	if err := writeYAML(filepath.Join(abs, "kustomization.yaml"), head+"# Further components of deploy/ (webhooks) go after "+overlayComponent+".\n", kustomization); err != nil {
		return err
	}
	return writeYAML(filepath.Join(abs, overlayComponent, "kustomization.yaml"), head, component)
}

func writeYAML(path, head string, v any) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, append([]byte(head), data...), 0o644); err != nil {
		return errors.Join(fmt.Errorf("writing %s", path), err)
	}
	return nil
}
