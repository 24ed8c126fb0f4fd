package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

type diffOptions struct {
	mdFile, fromFile, toFile, stage string
	toExtensions                    extensionFiles
	renderFlags
}

func newDiffCommand(g *globals) *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff -f machinedeployment.yaml --from old-profile.yaml [--to new-profile.yaml] [--to-extension ext.yaml] [--stage STAGE]",
		Short: "Show what a new profile version changes in a MachineDeployment's rendered configuration.",
		Long: `diff renders the MachineDeployment with both profiles, exactly as the controller would (templates, plugin,
node flags), and lists what differs in each stage: files added, removed or changed (mode, encoding and a
unified diff of the content), units and their drop-ins (enable, mask, content), cloud-init modules and SSH
keys, plus the change in user-data size. Run it before rolling a profile out to see what new machines of the
MachineDeployment will get. Credentials stay placeholders.

The output is deterministic. Like diff(1), the exit status is 0 when the rendered configurations are the same,
1 when they differ and 2 when something went wrong.`,
		Example: `  osmctl diff -f machinedeployment.yaml --from osp-ubuntu-v1.yaml --to osp-ubuntu-v2.yaml
  osmctl diff -f machinedeployment.yaml --from osp.yaml --to osp-next.yaml --stage provisioning
  osmctl diff -f machinedeployment.yaml --from osp-ubuntu.yaml --to-extension site-extension.yaml
  osmctl diff -f machinedeployment.yaml --from osp-myos.yaml --plugin-file myos.wasm`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annotationErrorExitCode: "2"},
		RunE:        func(cmd *cobra.Command, _ []string) error { return o.run(cmd, g) },
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return exitError{code: 2, err: suggestFlag(c, err)} })
	f := cmd.Flags()
	f.StringVarP(&o.mdFile, "filename", "f", "", "MachineDeployment YAML file (required).")
	f.StringVar(&o.fromFile, "from", "", "OperatingSystemProfile YAML file of the version rolled out now (required).")
	f.StringVar(&o.toFile, "to", "", "OperatingSystemProfile YAML file of the new version (default: --from, to see what --to-extension changes).")
	f.StringVar(&o.stage, "stage", "both", "Stage to compare: bootstrap, provisioning or both.")
	o.cluster.addFlags(f, true, "API server URL nodes use.")
	gofs := flag.NewFlagSet("node", flag.ContinueOnError)
	o.node.AddFlags(gofs)
	f.AddGoFlagSet(gofs)
	o.registry.addFlags(f, false)
	o.addTenancyFlag(f)
	o.extensions.addFlag(f, "extension", "OperatingSystemProfileExtension YAML file applied to both sides (repeatable).")
	o.toExtensions.addFlag(f, "to-extension", "OperatingSystemProfileExtension YAML file applied to the new side only (repeatable): shows what applying it changes.")
	f.StringVar(&o.pluginFile, pluginFileFlag, "", "Plugin module file (.wasm) that stands in for the new side's plugin (--to's spec.plugin) while --from keeps its own: "+
		"shows what a local module changes before it is pushed.")
	for _, name := range []string{"filename", "from"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// side is one of the two renders being compared.
type side struct {
	file       string
	extensions extensionFiles
	osp        *osmv1alpha1.OperatingSystemProfile
	out        *render.Output
	renderer   *render.Renderer
}

func (o *diffOptions) run(cmd *cobra.Command, g *globals) error {
	stages, err := parseStages(o.stage)
	if err != nil {
		return err
	}
	md := &clusterv1alpha1.MachineDeployment{}
	if err := readObject(o.mdFile, md); err != nil {
		return err
	}
	if o.toFile == "" {
		o.toFile = o.fromFile // comparing the effect of --to-extension on one profile
	}
	from, to := &side{file: o.fromFile, extensions: o.extensions}, &side{file: o.toFile, extensions: append(append(extensionFiles(nil), o.extensions...), o.toExtensions...)}
	for _, s := range []*side{from, to} {
		s.osp = &osmv1alpha1.OperatingSystemProfile{}
		if err := readObject(s.file, s.osp); err != nil {
			return err
		}
	}
	// The old side renders with the profile's own plugin; --plugin-file stands in for the new side's only.
	fromFlags := o.renderFlags
	fromFlags.pluginFile = ""
	var settings render.Settings
	var cluster render.ClusterInfo
	if from.renderer, settings, cluster, err = fromFlags.renderer(cmd, g); err != nil {
		return err
	}
	to.renderer = from.renderer
	if o.pluginFile != "" {
		if err := withPluginFile(to.osp, o.pluginFile); err != nil {
			return err
		}
		if to.renderer, _, _, err = o.renderer(cmd, g); err != nil {
			return err
		}
	}
	for _, s := range []*side{from, to} {
		if err := o.checkTenancy(md, s.osp); err != nil {
			return err
		}
		xs, err := s.extensions.forProfile(s.osp, md)
		if err != nil {
			return err
		}
		s.out, err = s.renderer.Render(cmd.Context(), render.Input{
			MachineDeployment: md, Profile: s.osp, Settings: settings,
			Cluster: cluster, Extensions: xs,
		})
		if err != nil {
			return fmt.Errorf("rendering %s with profile %s (%s): %w", md.Name, s.osp.Name, s.file, pluginError(err))
		}
	}

	var w strings.Builder
	fmt.Fprintf(&w, "--- %s: %s\n+++ %s: %s\n", from.file, from.describe(), to.file, to.describe())
	changed := false
	if a, b := from.out.Utility(), to.out.Utility(); a != b {
		fmt.Fprintf(&w, "\nprovisioning utility changed: %s -> %s\n", a, b)
		changed = true
	}
	var summary []string
	for _, stage := range stages {
		changes := compareStage(from.out.Stage(stage), to.out.Stage(stage))
		if len(changes) == 0 {
			summary = append(summary, fmt.Sprintf("%s unchanged", stage))
			continue
		}
		changed = true
		for _, c := range changes {
			writeChange(&w, stage, c)
		}
		sizes, err := userDataSizes(cmd, stage, from.out, to.out)
		if err != nil {
			return err
		}
		summary = append(summary, fmt.Sprintf("%s: %d change(s), user-data %s", stage, len(changes), sizes))
	}
	fmt.Fprintf(&w, "\n%s\n", strings.Join(summary, "; "))
	if _, err := io.WriteString(cmd.OutOrStdout(), w.String()); err != nil {
		return err
	}
	if changed {
		return exitError{code: 1}
	}
	return nil
}

func writeChange(w *strings.Builder, stage abi.Stage, c change) {
	fmt.Fprintf(w, "\n%s: %s %s", stage, c.object, c.kind)
	if len(c.notes) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(c.notes, ", "))
	}
	w.WriteString("\n" + c.patch)
}

// describe names the profile version and what rendered it.
func (s *side) describe() string {
	d := fmt.Sprintf("profile %s %s, %s", s.osp.Name, s.osp.Spec.Version, s.out.Utility())
	for _, x := range s.out.Extensions {
		d += ", extension " + x.Name
	}
	if p := s.out.Plugin; p != nil {
		return d + fmt.Sprintf(", plugin %s %s (%s)", p.Name, p.Version, runtime.ShortDigest(p.Digest))
	}
	return d + ", templates only"
}

// userDataSizes encodes the stage on both sides, with credentials as placeholders, and reports the sizes.
func userDataSizes(cmd *cobra.Command, stage abi.Stage, from, to *render.Output) (string, error) {
	secrets := render.SecretValues{
		BootstrapToken:         render.Placeholders.BootstrapToken,
		ProvisioningToken:      render.Placeholders.ProvisioningToken,
		CloudConfig:            render.Placeholders.CloudConfig,
		RegistryAuth:           render.Placeholders.RegistryAuth,
		RHSubscriptionPassword: render.Placeholders.RHSubscriptionPassword,
	}
	var sizes [2]int
	for i, out := range []*render.Output{from, to} {
		secrets.Plugin = out.PluginSecretPlaceholders()
		data, err := out.UserData(cmd.Context(), stage, secrets)
		if err != nil {
			return "", fmt.Errorf("encoding the %s stage: %w", stage, err)
		}
		sizes[i] = len(data)
	}
	return fmt.Sprintf("%d -> %d bytes", sizes[0], sizes[1]), nil
}
