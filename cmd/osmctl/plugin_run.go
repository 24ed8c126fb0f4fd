package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

type pluginRunOptions struct {
	input, mdFile, ospFile, stage, saveRequest string
	cluster                                    clusterFlags
	config                                     map[string]string
	node                                       render.NodeFlags
}

func newPluginRunCommand(p *pluginCommon) *cobra.Command {
	o := &pluginRunOptions{}
	cmd := &cobra.Command{
		Use:   "run PLUGIN (--input request.json | --md machinedeployment.yaml [--osp profile.yaml] [--stage STAGE])",
		Short: "Dry-run a plugin's osm_render in the controller's sandbox and print the response.",
		Long: `run calls the plugin's osm_render through the same sandbox runtime and production limits as the controller
(memory cap, per-call timeout, no network, no file system) and prints the RenderResponse as JSON.

The RenderRequest is either a file (--input, "-" for stdin; the plugin SDK's fixtures have this format) or
built exactly as the controller builds it (--md): the MachineDeployment and profile are rendered through the
real pipeline, templates included, and the plugin under test is called in place of the profile's own plugin,
with the profile's spec.plugin.config. Without --osp the embedded default profile for the MachineDeployment's
OS is used. --save-request writes the request, to start a test fixture from it.

A failing call prints one line (plugin, module digest, export, reason, message), followed by the plugin's
stderr when it crashed, and exits with status 1.`,
		Example: `  osmctl plugin run myos.wasm --input testdata/provisioning.request.json
  osmctl plugin run myos.wasm --md machinedeployment.yaml --osp osp-myos.yaml --stage bootstrap
  osmctl plugin run registry.example.com/osm/myos@sha256:... --md machinedeployment.yaml --config ntpServer=ntp.lan`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, p, args[0]) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.input, "input", "i", "", `RenderRequest JSON file to send ("-" for stdin).`)
	f.StringVar(&o.mdFile, "md", "", "MachineDeployment YAML file to build the RenderRequest from, as the controller does.")
	f.StringVar(&o.ospFile, "osp", "", "OperatingSystemProfile YAML file for --md; default: the embedded default profile.")
	f.StringVar(&o.stage, "stage", "provisioning", "Stage to render with --md: bootstrap or provisioning.")
	f.StringVar(&o.saveRequest, "save-request", "", "Also write the RenderRequest sent to the plugin to this file.")
	f.StringToStringVar(&o.config, "config", nil, "Plugin config key=value, overriding the request's or profile's (repeatable).")
	o.cluster.addFlags(f, false, "API server URL nodes use (with --md).")
	gofs := flag.NewFlagSet("node", flag.ContinueOnError)
	o.node.AddFlags(gofs)
	f.AddGoFlagSet(gofs)
	cmd.MarkFlagsMutuallyExclusive("input", "md")
	cmd.MarkFlagsOneRequired("input", "md")
	return cmd
}

func (o *pluginRunOptions) run(cmd *cobra.Command, p *pluginCommon, arg string) error {
	var (
		req *abi.RenderRequest
		err error
	)
	if o.input != "" {
		if req, err = o.readRequest(cmd.InOrStdin()); err != nil {
			return err
		}
	}
	pm, err := p.load(cmd, arg)
	if err != nil {
		return err
	}
	md := pm.Module.Metadata()
	if req != nil {
		if len(o.config) > 0 && req.Config == nil {
			req.Config = map[string]string{}
		}
		for k, v := range o.config {
			req.Config[k] = v
		}
	} else {
		if req, err = o.buildRequest(cmd, pm); err != nil {
			return err
		}
	}
	if o.saveRequest != "" {
		if err := writeJSONFile(o.saveRequest, req); err != nil {
			return err
		}
	}
	resp, err := pm.Module.RenderAsGiven(cmd.Context(), req)
	if err != nil {
		return pluginError(err)
	}
	for _, w := range resp.Warnings {
		cmd.PrintErrf("osmctl: warning from plugin %s: %s\n", md.Name, w)
	}
	return writeJSON(cmd.OutOrStdout(), resp)
}

// readRequest decodes the request strictly: a misspelt field in a hand-written request would otherwise
// silently test something else.
func (o *pluginRunOptions) readRequest(stdin io.Reader) (*abi.RenderRequest, error) {
	var data []byte
	var err error
	if o.input == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(o.input)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the render request: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	req := &abi.RenderRequest{}
	if err := dec.Decode(req); err != nil {
		return nil, fmt.Errorf("%s: not a RenderRequest: %w", o.input, err)
	}
	return req, nil
}

// buildRequest renders the MachineDeployment through the controller's pipeline, with the module under test as
// the profile's plugin, and captures the request the pipeline sends it for the chosen stage.
func (o *pluginRunOptions) buildRequest(cmd *cobra.Command, pm *pluginModule) (*abi.RenderRequest, error) {
	var stage abi.Stage
	switch o.stage {
	case string(abi.StageBootstrap), string(abi.StageProvisioning):
		stage = abi.Stage(o.stage)
	default:
		return nil, fmt.Errorf("--stage %q: want bootstrap or provisioning", o.stage)
	}
	md := &clusterv1alpha1.MachineDeployment{}
	if err := readObject(o.mdFile, md); err != nil {
		return nil, err
	}
	osp, err := (&renderOptions{ospFile: o.ospFile}).profile(md)
	if err != nil {
		return nil, err
	}
	settings, err := o.node.Settings(render.DefaultSettings())
	if err != nil {
		return nil, err
	}

	meta := pm.Module.Metadata()
	osp = osp.DeepCopy()
	ref := osp.Spec.Plugin
	if ref == nil {
		ref = &osmv1alpha1.PluginReference{Builtin: meta.Name}
		osp.Spec.Plugin = ref
	}
	for k, v := range o.config {
		if ref.Config == nil {
			ref.Config = map[string]string{}
		}
		ref.Config[k] = v
	}
	// The controller refuses a profile whose config does not fit the plugin's schema before it renders.
	if _, err := meta.ApplyConfig(ref.Config); err != nil {
		return nil, fmt.Errorf("profile %s, plugin %s: %w", osp.Name, meta.Name, err)
	}
	pr := &probe{module: pm.Module, stage: stage,
		id: osmv1alpha1.ResolvedPlugin{Name: meta.Name, Version: meta.Version, Digest: pm.Module.Digest(), Source: pm.Source}}
	// --kubernetes-ca-bundle, a node flag, replaces the example CA as it replaces the cluster's.
	cluster, err := o.cluster.info()
	if err != nil {
		return nil, err
	}
	_, err = (&render.Renderer{Plugins: pr}).Render(cmd.Context(), render.Input{
		MachineDeployment: md, Profile: osp, Settings: settings, Cluster: cluster,
	})
	if pr.request == nil {
		if err == nil {
			err = errors.New("the pipeline did not call the plugin")
		}
		return nil, fmt.Errorf("rendering %s with profile %s: %w", md.Name, osp.Name, err)
	}
	return pr.request, nil
}

// errProbed stops the pipeline once the probe has the request it is after.
var errProbed = errors.New("request captured")

// probe stands in for the profile's plugin in the render pipeline. For the stage under test it records the
// request and stops the pipeline; for the other stage it passes the template output through, so that stage
// costs no plugin call and cannot fail the run.
type probe struct {
	module  *plugin.Plugin
	stage   abi.Stage
	id      osmv1alpha1.ResolvedPlugin
	request *abi.RenderRequest
}

var (
	_ render.Plugin       = (*probe)(nil)
	_ render.PluginSource = (*probe)(nil)
)

func (p *probe) Resolve(context.Context, string, *osmv1alpha1.PluginReference) (render.Plugin, error) {
	return p, nil
}

func (p *probe) Metadata() abi.Metadata               { return p.module.Metadata() }
func (p *probe) Identity() osmv1alpha1.ResolvedPlugin { return p.id }
func (p *probe) Encode(ctx context.Context, req *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	return p.module.Encode(ctx, req)
}

func (p *probe) Render(_ context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	if req.Stage != p.stage {
		return &abi.RenderResponse{ABIVersion: abi.Version, Config: req.Input}, nil
	}
	r := *req
	p.request = &r
	return nil, errProbed
}

// writeJSON writes v as indented JSON, the layout of the SDK's fixture files, with <, > and & left as they are
// (scripts are full of them).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeJSONFile(path string, v any) error {
	var buf bytes.Buffer
	if err := writeJSON(&buf, v); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
