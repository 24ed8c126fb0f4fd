package main

import (
	"bytes"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/sdk/abi"
)

type renderOptions struct {
	mdFile, ospFile, stage, output    string
	bootstrapToken, provisioningToken string
	pluginSecrets                     []string
	renderFlags
}

// renderFlags are the flags render and diff share: what the controller would know besides the MachineDeployment
// and the profile.
type renderFlags struct {
	cluster    clusterFlags
	node       render.NodeFlags
	registry   registryFlags
	extensions extensionFiles
	pluginFile string
	// namespace is the controller's -namespace, whose profiles every namespace may use (tenancy).
	namespace string
}

// addTenancyFlag adds --namespace, the controller's namespace that the tenancy check of render and diff uses.
func (f *renderFlags) addTenancyFlag(fs *pflag.FlagSet) {
	fs.StringVar(&f.namespace, "namespace", render.DefaultSettings().Namespace,
		"The controller's -namespace: its profiles serve every namespace; a profile elsewhere serves only its own namespace and those its spec.allowedNamespaces lists.")
}

// checkTenancy refuses to render a profile for a MachineDeployment that the controller would refuse it to
// (ProfileNotAllowed), when both files name their namespace.
func (f *renderFlags) checkTenancy(md *clusterv1alpha1.MachineDeployment, osp *osmv1alpha1.OperatingSystemProfile) error {
	if md.Namespace == "" || osp.Namespace == "" {
		return nil
	}
	if err := render.ProfileAllowed(osp, md.Namespace, f.namespace); err != nil {
		return fmt.Errorf("%w (reason %s)", err, osmv1alpha1.ReasonProfileNotAllowed)
	}
	return nil
}

// renderer returns the renderer, settings and cluster facts that the command's renders use.
func (f *renderFlags) renderer(cmd *cobra.Command, g *globals) (*render.Renderer, render.Settings, render.ClusterInfo, error) {
	settings, err := f.node.Settings(render.DefaultSettings())
	if err != nil {
		return nil, settings, render.ClusterInfo{}, err
	}
	cluster, err := f.cluster.info()
	if err != nil {
		return nil, settings, cluster, err
	}
	var src render.PluginSource
	if f.pluginFile != "" {
		src, err = g.fileSource(cmd, f.pluginFile)
	} else {
		src, err = g.source(cmd, &f.registry)
	}
	if err != nil {
		return nil, settings, cluster, err
	}
	return &render.Renderer{Plugins: src}, settings, cluster, nil
}

func newRenderCommand(g *globals) *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render -f machinedeployment.yaml [--osp profile.yaml] [--stage bootstrap|provisioning]",
		Short: "Render a MachineDeployment's user-data offline, with the embedded default profiles and plugins.",
		Long: `render prints the user-data machine-controller would hand to a new machine of the MachineDeployment
(bootstrap) or that the machine fetches while it boots (provisioning), exactly as the controller renders it.

Without --osp, the embedded default profile for the MachineDeployment's OS is used (or the one its
k8c.io/operating-system-profile annotation names). Credentials stay placeholders unless given with
--bootstrap-token, --provisioning-token and --plugin-secret (a profile's spec.plugin.secrets, NAME=@FILE);
without --ca-file an example CA is used. A profile's plugin image (spec.plugin.image) is pulled with the
credentials of the local docker config and the --plugin-registry-* settings. --plugin-file renders with a local plugin module instead of the profile's plugin, without a
registry.`,
		Example: `  osmctl render -f machinedeployment.yaml --stage both
  osmctl render -f machinedeployment.yaml --osp osp-myos.yaml --plugin-file myos.wasm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd, g) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.mdFile, "filename", "f", "", "MachineDeployment YAML file (required).")
	f.StringVar(&o.ospFile, "osp", "", "OperatingSystemProfile YAML file; default: the embedded default profile.")
	f.StringVar(&o.stage, "stage", "provisioning", "Stage to print: bootstrap, provisioning or both.")
	f.StringVarP(&o.output, "output", "o", "userdata", "What to print: userdata, or osc for the OperatingSystemConfig.")
	o.cluster.addFlags(f, true, "API server URL nodes use.")
	f.StringVar(&o.bootstrapToken, "bootstrap-token", "", "Bootstrap token to substitute (default: keep the placeholder).")
	f.StringVar(&o.provisioningToken, "provisioning-token", "", "Provisioning token to substitute (default: keep the placeholder).")
	f.StringArrayVar(&o.pluginSecrets, "plugin-secret", nil,
		"NAME=@FILE (or NAME=VALUE): value of the profile's plugin secret NAME (spec.plugin.secrets) to substitute (repeatable; default: keep the placeholder).")
	gofs := flag.NewFlagSet("node", flag.ContinueOnError)
	o.node.AddFlags(gofs)
	f.AddGoFlagSet(gofs)
	o.registry.addFlags(f, false)
	o.addTenancyFlag(f)
	f.StringVar(&o.pluginFile, pluginFileFlag, "", pluginFileUsage)
	o.extensions.addFlag(f, "extension", "OperatingSystemProfileExtension YAML file (repeatable); those that select the profile are applied as the controller applies them.")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (o *renderOptions) run(cmd *cobra.Command, g *globals) error {
	md := &clusterv1alpha1.MachineDeployment{}
	if err := readObject(o.mdFile, md); err != nil {
		return err
	}
	osp, err := o.profile(md)
	if err != nil {
		return err
	}
	if o.pluginFile != "" {
		if err := withPluginFile(osp, o.pluginFile); err != nil {
			return err
		}
	}
	if err := o.checkTenancy(md, osp); err != nil {
		return err
	}
	renderer, settings, cluster, err := o.renderer(cmd, g)
	if err != nil {
		return err
	}
	xs, err := o.extensions.forProfile(osp, md)
	if err != nil {
		return err
	}
	out, err := renderer.Render(cmd.Context(), render.Input{
		MachineDeployment: md, Profile: osp, Settings: settings,
		Cluster: cluster, Extensions: xs,
	})
	if err != nil {
		return fmt.Errorf("rendering %s with profile %s: %w", md.Name, osp.Name, err)
	}
	if len(o.extensions) > 0 {
		cmd.PrintErrf("osmctl: extensions applied: %v\n", extensionNames(xs))
	}
	for _, w := range out.Warnings {
		cmd.PrintErrln("warning: " + w)
	}
	if o.output == "osc" {
		osc := osmv1alpha1.OperatingSystemConfig{Spec: out.Spec}
		// The whole OSC unless --stage narrows it to one stage's configuration.
		if cmd.Flags().Changed("stage") {
			switch o.stage {
			case "bootstrap":
				osc.Spec.ProvisioningConfig = osmv1alpha1.OSCConfig{}
			case "provisioning":
				osc.Spec.BootstrapConfig = osmv1alpha1.OSCConfig{}
			case "both":
			default:
				_, err := parseStages(o.stage)
				return err
			}
		}
		osc.APIVersion, osc.Kind = osmv1alpha1.GroupVersion.String(), "OperatingSystemConfig"
		osc.Name, osc.Namespace = render.OSCName(md), settings.Namespace
		data, err := yaml.Marshal(osc)
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(data)
		return err
	}
	if o.output != "userdata" {
		return fmt.Errorf("--output %q: want userdata or osc", o.output)
	}
	stages, err := parseStages(o.stage)
	if err != nil {
		return err
	}
	secrets := render.SecretValues{
		BootstrapToken:         orDefault(o.bootstrapToken, render.Placeholders.BootstrapToken),
		ProvisioningToken:      orDefault(o.provisioningToken, render.Placeholders.ProvisioningToken),
		CloudConfig:            render.Placeholders.CloudConfig,
		RegistryAuth:           render.Placeholders.RegistryAuth,
		RHSubscriptionPassword: render.Placeholders.RHSubscriptionPassword,
	}
	if secrets.Plugin, err = pluginSecretValues(out, o.pluginSecrets); err != nil {
		return err
	}
	for _, stage := range stages {
		data, err := out.UserData(cmd.Context(), stage, secrets)
		if err != nil {
			return err
		}
		plugin := ""
		if p := out.Plugin; p != nil {
			plugin = fmt.Sprintf(", plugin %s %s from %s", p.Name, p.Version, p.Source)
		}
		cmd.PrintErrf("osmctl: %s user-data for %s/%s (profile %s%s, %s, %d bytes)\n",
			stage, md.Namespace, md.Name, osp.Name, plugin, out.Utility(), len(data))
		if len(stages) > 1 {
			// Both stages in one stream: a YAML document separator before each, which cloud-config (YAML) and
			// Ignition (JSON, a subset of YAML) readers alike split on.
			if _, err := fmt.Fprintf(cmd.OutOrStdout(), "--- # %s user-data\n", stage); err != nil {
				return err
			}
		}
		if _, err := cmd.OutOrStdout().Write(data); err != nil {
			return err
		}
		if len(stages) > 1 && !bytes.HasSuffix(data, []byte("\n")) {
			if _, err := io.WriteString(cmd.OutOrStdout(), "\n"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (o *renderOptions) profile(md *clusterv1alpha1.MachineDeployment) (*osmv1alpha1.OperatingSystemProfile, error) {
	if o.ospFile != "" {
		osp := &osmv1alpha1.OperatingSystemProfile{}
		return osp, readObject(o.ospFile, osp)
	}
	pc, err := md.ProviderConfig()
	if err != nil {
		return nil, err
	}
	name := md.Annotations[clusterv1alpha1.AnnotationOSP]
	if name == "" {
		name = "osp-" + pc.OperatingSystem
	}
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, osp := range defaults {
		if osp.Name == name {
			return osp, nil
		}
		names = append(names, osp.Name)
	}
	return nil, fmt.Errorf("no embedded default profile %q; pass --osp (embedded: %s)", name, strings.Join(names, ", "))
}

func parseStages(s string) ([]abi.Stage, error) {
	switch s {
	case "bootstrap":
		return []abi.Stage{abi.StageBootstrap}, nil
	case "provisioning":
		return []abi.Stage{abi.StageProvisioning}, nil
	case "both":
		return []abi.Stage{abi.StageBootstrap, abi.StageProvisioning}, nil
	}
	return nil, fmt.Errorf("--stage %q: want bootstrap, provisioning or both", s)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// readObject decodes a YAML file strictly, so a typo in a field name is an error rather than silently ignored.
func readObject(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
