package render

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/runtime"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/containerd"
	"github.com/osmhq/osm/host/nodeconfig"
	"github.com/osmhq/osm/host/templates"
	"github.com/osmhq/osm/sdk/abi"
)

// CloudConfigKey is the key of the user-data in the Secrets machine-controller reads.
const CloudConfigKey = "cloud-config"

// Renderer turns a profile and a MachineDeployment into an OperatingSystemConfig and user-data.
type Renderer struct {
	// Plugins resolves the plugins profiles refer to. Without it, profiles with a plugin fail to render.
	Plugins PluginSource
}

// Output is a rendered configuration. Its Spec holds placeholders where credentials go; UserData substitutes
// them and encodes a stage for the provisioning utility.
type Output struct {
	// Spec is the OperatingSystemConfig spec.
	Spec osmv1alpha1.OperatingSystemConfigSpec
	// Plugin is the plugin that rendered the configuration, nil for a templates-only profile.
	Plugin *osmv1alpha1.ResolvedPlugin
	// Pipeline are the plugins of spec.plugins after the first, in order.
	Pipeline []osmv1alpha1.ResolvedPlugin
	// Extensions are the extensions applied, in order.
	Extensions []AppliedExtension
	// Warnings are the plugins' warnings, to be shown as events.
	Warnings []string

	stages   map[abi.Stage]*abi.NodeConfig
	plugin   Plugin
	pipeline []pipelineStep
	context  abi.RenderContext
	// pluginContext is context as the profile's own plugin sees it: with the placeholders of its secrets.
	pluginContext abi.RenderContext
	// pluginSecrets are the names of the profile's spec.plugin.secrets.
	pluginSecrets []string
	fromMachine   SecretValues
	hostname      bool
	// machineDeployment is the MachineDeployment's name.
	machineDeployment string
	distUpgrade       bool
	machineState      *machine
	// deferred is the provisioning stage's DeferredCommands (see appendDeferred).
	deferred *deferredCommands
}

type crConfig struct {
	config string
	hosts  map[string]string
	files  []containerd.HostsFile
}

// Render renders both stages of the profile for the MachineDeployment.
func (r *Renderer) Render(ctx context.Context, in Input) (*Output, error) {
	m, err := decode(in)
	if err != nil {
		return nil, err
	}
	cr, err := m.containerRuntime()
	if err != nil {
		return nil, err
	}
	plugin, err := r.plugin(ctx, m)
	if err != nil {
		return nil, err
	}
	pipeline, err := r.pipeline(ctx, m)
	if err != nil {
		return nil, err
	}
	out := &Output{
		stages:            map[abi.Stage]*abi.NodeConfig{},
		plugin:            plugin,
		pipeline:          pipeline,
		Extensions:        appliedExtensions(in.Extensions),
		context:           m.renderContext(cr),
		fromMachine:       m.secretValues(),
		hostname:          m.cloudProvider() != "aws",
		machineDeployment: in.MachineDeployment.Name,
		distUpgrade:       m.os.distUpgradeOnBoot(),
		machineState:      m,
		pluginSecrets:     PluginSecretNames(in.Profile),
	}
	out.pluginContext = out.context
	out.pluginContext.Secrets.Plugin = out.PluginSecretPlaceholders()
	data := m.templateData(cr.config)
	osp := m.Profile
	// Each plugin call (each stage's render, each encoding) runs on a sandbox instance of its own: nothing an
	// instance holds reaches another call, of this MachineDeployment or another.
	for _, st := range []struct {
		stage   abi.Stage
		section string
		cfg     *osmv1alpha1.OSPConfig
	}{
		{abi.StageBootstrap, "spec.bootstrapConfig", &osp.Spec.BootstrapConfig},
		{abi.StageProvisioning, "spec.provisioningConfig", &osp.Spec.ProvisioningConfig},
	} {
		cfg, err := out.renderStage(ctx, r, m, st.stage, st.section, st.cfg, cr, data, plugin, pipeline)
		if err != nil {
			return nil, err
		}
		cfg = m.identity.apply(cfg) // the real names in place of what plugins saw (identity.go)
		if err := nodeconfig.Check(cfg); err != nil {
			return nil, withReason(osmv1alpha1.ReasonRenderFailed, fmt.Errorf("%s stage: %w", st.stage, err))
		}
		out.stages[st.stage] = cfg
	}
	for i, w := range out.Warnings {
		out.Warnings[i] = m.identity.replace(w)
	}
	if plugin != nil {
		id := plugin.Identity()
		out.Plugin = &id
	}
	for _, step := range pipeline {
		out.Pipeline = append(out.Pipeline, step.plugin.Identity())
	}
	out.Spec = osmv1alpha1.OperatingSystemConfigSpec{
		OSName:              osp.Spec.OSName,
		OSVersion:           osp.Spec.OSVersion,
		CloudProvider:       osmv1alpha1.CloudProviderSpec{Name: m.cloudProvider(), Spec: runtime.RawExtension{Raw: ProviderSpec(m.provider.CloudProviderSpec.Raw)}},
		BootstrapConfig:     ToOSC(out.stages[abi.StageBootstrap]),
		ProvisioningConfig:  ToOSC(out.stages[abi.StageProvisioning]),
		ProvisioningUtility: osmv1alpha1.ProvisioningUtility(m.utility),
	}
	return out, nil
}

// renderStage renders one stage: the profile's templates, its plugin, the plugins of spec.plugins and the
// extensions, in that order. The profile's and the extensions' templates share one template budget, and every
// contributor's output is checked as soon as it is there (stageGuard): its size, and where it put credential
// placeholders.
func (o *Output) renderStage(ctx context.Context, r *Renderer, m *machine, stage abi.Stage, section string, osc *osmv1alpha1.OSPConfig,
	cr crConfig, data any, plugin Plugin, pipeline []pipelineStep) (*abi.NodeConfig, error) {
	osp := m.Profile
	budget := templates.NewStage(ctx, stageConfigLimit(stage))
	defer budget.Close()
	guard := newStageGuard(stage)
	profile := "profile " + objectName(osp.Namespace, osp.Name)
	cfg, err := budget.Render(section, osc, m.Settings.ContainerRuntime, data)
	if err != nil {
		return nil, withReason(osmv1alpha1.ReasonTemplateError, fmt.Errorf("%s: %w", profile, err))
	}
	m.completeStage(stage, cfg, cr)
	if err := guard.check(contributor{name: profile + " " + section + " (its templates)", kind: byProfileTemplates}, cfg); err != nil {
		return nil, err
	}
	if plugin != nil {
		if cfg, err = o.callRender(ctx, m, plugin, osp.Spec.Plugin.Config, o.pluginContext, stage, cfg); err != nil {
			return nil, err
		}
		if err := guard.check(contributor{name: fmt.Sprintf("%s spec.plugin (plugin %s)", profile, plugin.Metadata().Name), kind: byProfilePlugin}, cfg); err != nil {
			return nil, err
		}
	}
	for _, step := range pipeline {
		if cfg, err = o.callRender(ctx, m, step.plugin, step.config, o.context, stage, cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", step.what, err)
		}
		if err := guard.check(contributor{name: fmt.Sprintf("%s (plugin %s)", step.what, step.plugin.Metadata().Name), kind: byOther}, cfg); err != nil {
			return nil, err
		}
	}
	if cfg, err = o.applyExtensions(ctx, r, m, stage, cfg, data, budget, guard); err != nil {
		return nil, err
	}
	o.appendDeferred(stage, cfg, m.utility)
	return cfg, nil
}

// completeStage adds what upstream OSM adds to every profile's output: the SSH keys, the RHEL subscription
// module and, for provisioning, containerd's per-registry hosts.toml files.
func (m *machine) completeStage(stage abi.Stage, cfg *abi.NodeConfig, cr crConfig) {
	cfg.UserSSHKeys = append([]string(nil), m.provider.SSHPublicKeys...)
	if sub := m.rhSubscription(); sub != nil {
		cfg.EnsureModules().RHSubscription = sub
	}
	if stage == abi.StageProvisioning {
		for _, h := range cr.files {
			cfg.Files = append(cfg.Files, abi.PlainFile(h.Path, 0o600, h.Content))
		}
	}
}

func (m *machine) containerRuntime() (crConfig, error) {
	s := m.Settings
	if s.ContainerRuntime != "containerd" {
		return crConfig{}, unsupported(fmt.Errorf("container runtime %q is not supported; only containerd is", s.ContainerRuntime))
	}
	opts := containerd.Options{
		PauseImage:                s.PauseImage,
		InsecureRegistries:        s.InsecureRegistries,
		RegistryMirrors:           s.RegistryMirrors,
		ContainerdRegistryMirrors: s.ContainerdRegistryMirrors,

		DeviceOwnershipFromSecurityContext: s.DeviceOwnershipFromSecurityContext,
	}
	if len(s.RegistryCredentialHosts) > 0 {
		opts.AuthPlaceholder = Placeholders.RegistryAuth
	}
	config, err := containerd.ConfigTOML(opts)
	if err != nil {
		return crConfig{}, err
	}
	files, err := containerd.HostsFiles(opts)
	if err != nil {
		return crConfig{}, err
	}
	cr := crConfig{config: config, hosts: map[string]string{}, files: files}
	for _, h := range cr.files {
		cr.hosts[h.Dir] = h.Content
	}
	return cr, nil
}

// pipelineStep is a plugin of the profile's spec.plugins.
type pipelineStep struct {
	plugin Plugin
	config map[string]string
	what   string
}

// pipeline resolves the profile's spec.plugins, which run after spec.plugin, each on what the one before returned.
func (r *Renderer) pipeline(ctx context.Context, m *machine) ([]pipelineStep, error) {
	var steps []pipelineStep
	for i := range m.Profile.Spec.Plugins {
		ref := &m.Profile.Spec.Plugins[i]
		what := fmt.Sprintf("profile %s spec.plugins[%d]", objectName(m.Profile.Namespace, m.Profile.Name), i)
		p, err := r.resolve(ctx, m, ref, what)
		if err != nil {
			return nil, err
		}
		steps = append(steps, pipelineStep{plugin: p, config: ref.Config, what: what})
	}
	return steps, nil
}

func (r *Renderer) plugin(ctx context.Context, m *machine) (Plugin, error) {
	if m.Profile.Spec.Plugin == nil {
		return nil, nil
	}
	p, err := r.resolve(ctx, m, m.Profile.Spec.Plugin, "")
	if err != nil {
		return nil, err
	}
	md := p.Metadata()
	if err := md.CheckSecrets(PluginSecretNames(m.Profile)); err != nil {
		return nil, withReason(osmv1alpha1.ReasonPluginSecretMissing, fmt.Errorf("profile %s: %w", objectName(m.Profile.Namespace, m.Profile.Name), err))
	}
	return p, nil
}

func (o *Output) callRender(ctx context.Context, m *machine, p Plugin, config map[string]string, rc abi.RenderContext, stage abi.Stage, in *abi.NodeConfig) (*abi.NodeConfig, error) {
	rc, in = m.identity.forPlugin(p.Metadata(), rc, in)
	req := &abi.RenderRequest{
		ABIVersion:          abi.Version,
		Stage:               stage,
		ProvisioningUtility: m.utility,
		Config:              pluginConfig(p.Metadata(), config),
		Context:             rc,
		Input:               *in,
	}
	resp, err := p.Render(ctx, req)
	if err != nil {
		return nil, err
	}
	o.Warnings = append(o.Warnings, resp.Warnings...)
	o.noteDeferred(stage, resp)
	cfg := resp.Config
	return &cfg, nil
}

// pluginConfig fills the schema's defaults into the profile's plugin config.
func pluginConfig(md abi.Metadata, cfg map[string]string) map[string]string {
	out := map[string]string{}
	for _, opt := range md.ConfigSchema {
		if opt.Default != "" {
			out[opt.Name] = opt.Default
		}
	}
	maps.Copy(out, cfg)
	if len(out) == 0 {
		return nil
	}
	return out
}

// Stage returns the rendered configuration of a stage, with placeholders.
func (o *Output) Stage(stage abi.Stage) *abi.NodeConfig { return o.stages[stage] }

// Utility is the provisioning utility the configuration is for.
func (o *Output) Utility() string { return string(o.Spec.ProvisioningUtility) }

// ToOSC converts a rendered stage to its OperatingSystemConfig form.
func ToOSC(cfg *abi.NodeConfig) osmv1alpha1.OSCConfig {
	out := osmv1alpha1.OSCConfig{UserSSHKeys: cfg.UserSSHKeys}
	for _, f := range cfg.Files {
		of := osmv1alpha1.File{Path: f.Path, Permissions: f.Permissions}
		if f.Content.Inline != nil {
			of.Content.Inline = &osmv1alpha1.FileContentInline{Encoding: f.Content.Inline.Encoding, Data: f.Content.Inline.Data}
		}
		out.Files = append(out.Files, of)
	}
	for _, u := range cfg.Units {
		ou := osmv1alpha1.Unit{Name: u.Name, Enable: u.Enable, Mask: u.Mask, Content: u.Content}
		for _, d := range u.DropIns {
			ou.DropIns = append(ou.DropIns, osmv1alpha1.DropIn{Name: d.Name, Content: d.Content})
		}
		out.Units = append(out.Units, ou)
	}
	if m := cfg.Modules; m != nil {
		out.CloudInitModules = &osmv1alpha1.CloudInitModule{
			BootCMD: m.BootCMD, RunCMD: m.RunCMD, RHSubscription: m.RHSubscription, YumRepos: m.YumRepos, YumRepoDir: m.YumRepoDir,
		}
	}
	return out
}
