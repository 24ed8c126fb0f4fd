package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/sdk/abi"
)

// inspection is what `plugin inspect -o json` prints.
type inspection struct {
	Name                  string                `json:"name"`
	Version               string                `json:"version"`
	Description           string                `json:"description,omitempty"`
	ABIVersion            string                `json:"abiVersion"`
	OperatingSystems      []abi.OperatingSystem `json:"operatingSystems"`
	ProvisioningUtilities []string              `json:"provisioningUtilities"`
	CloudProviders        []string              `json:"cloudProviders"`
	Exports               []string              `json:"exports"`
	ConfigSchema          []abi.ConfigOption    `json:"configSchema,omitempty"`
	Module                moduleInfo            `json:"module"`
	Artifact              *artifactInfo         `json:"artifact,omitempty"`
}

type moduleInfo struct {
	Source string `json:"source"`
	Digest string `json:"digest"`
	Size   int    `json:"size"`
}

type artifactInfo struct {
	Reference      string            `json:"reference"`
	ManifestDigest string            `json:"manifestDigest"`
	MediaTypes     oci.MediaTypes    `json:"mediaTypes"`
	Annotations    map[string]string `json:"annotations,omitempty"`
}

func newPluginInspectCommand(p *pluginCommon) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "inspect PLUGIN [-o text|json]",
		Short: "Show what a plugin declares: name, version, ABI, operating systems, exports, config schema, digests.",
		Long: `inspect loads the plugin into the controller's sandbox, which checks it exactly as the controller does
(WebAssembly module, ABI version, metadata, required exports), and prints its metadata, the digest and size
of the module and, for an OCI reference, the manifest digest to pin in profiles and the artifact's media
types and annotations.`,
		Example: `  osmctl plugin inspect myos.wasm
  osmctl plugin inspect registry.example.com/osm/myos:0.1.0 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: want text or json", output)
			}
			pm, err := p.load(cmd, args[0])
			if err != nil {
				return err
			}
			in := inspect(pm)
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), in)
			}
			return in.writeText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text or json.")
	return cmd
}

func inspect(pm *pluginModule) *inspection {
	md := pm.Module.Metadata()
	in := &inspection{
		Name: md.Name, Version: md.Version, Description: md.Description, ABIVersion: md.ABIVersion,
		OperatingSystems: md.OperatingSystems, ProvisioningUtilities: md.ProvisioningUtilities,
		CloudProviders: md.CloudProviders, ConfigSchema: md.ConfigSchema,
		Module: moduleInfo{Source: pm.Source, Digest: pm.Module.Digest(), Size: len(pm.Wasm)},
	}
	if in.ABIVersion == "" {
		in.ABIVersion = abi.Version
	}
	for _, e := range []string{abi.ExportMetadata, abi.ExportRender, abi.ExportValidate, abi.ExportEncode} {
		if pm.Module.Implements(e) {
			in.Exports = append(in.Exports, e)
		}
	}
	if a := pm.Artifact; a != nil {
		in.Artifact = &artifactInfo{Reference: a.Reference, ManifestDigest: a.ManifestDigest.String(), MediaTypes: a.MediaTypes, Annotations: a.Annotations}
	}
	return in
}

func (in *inspection) writeText(out io.Writer) error {
	var w strings.Builder
	tw := tabwriter.NewWriter(&w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { _, _ = fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Name", in.Name)
	row("Version", in.Version)
	if in.Description != "" {
		row("Description", in.Description)
	}
	row("ABI", in.ABIVersion)
	var oses []string
	for _, os := range in.OperatingSystems {
		versions := "any version"
		if len(os.Versions) > 0 {
			versions = strings.Join(os.Versions, ", ")
		}
		oses = append(oses, fmt.Sprintf("%s (%s)", os.Name, versions))
	}
	row("Operating systems", strings.Join(oses, "; "))
	row("Provisioning utilities", strings.Join(in.ProvisioningUtilities, ", "))
	row("Cloud providers", strings.Join(in.CloudProviders, ", "))
	row("Exports", strings.Join(in.Exports, ", "))
	row("Module", fmt.Sprintf("%s (%d bytes)", in.Module.Digest, in.Module.Size))
	row("Source", in.Module.Source)
	if a := in.Artifact; a != nil {
		row("Manifest digest", a.ManifestDigest)
		row("Manifest media type", a.MediaTypes.Manifest)
		if a.MediaTypes.ArtifactType != "" {
			row("Artifact type", a.MediaTypes.ArtifactType)
		}
		row("Config media type", a.MediaTypes.Config)
		row("Layer media type", a.MediaTypes.Layer)
		for _, k := range abi.SortedKeys(a.Annotations) {
			row("Annotation "+k, a.Annotations[k])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(in.ConfigSchema) == 0 {
		w.WriteString("Config schema: none (the plugin accepts any spec.plugin.config keys)\n")
		_, err := io.WriteString(out, w.String())
		return err
	}
	w.WriteString("Config schema:\n")
	tw = tabwriter.NewWriter(&w, 0, 4, 2, ' ', 0)
	cells := func(fields ...string) { _, _ = fmt.Fprintln(tw, "  "+strings.Join(fields, "\t")) }
	cells("KEY", "TYPE", "DEFAULT", "REQUIRED", "ALLOWED", "DESCRIPTION")
	for _, o := range in.ConfigSchema {
		required := "no"
		if o.Required {
			required = "yes"
		}
		typ := o.Type
		if typ == "" {
			typ = abi.ConfigString
		}
		cells(o.Name, typ, dash(o.Default), required, dash(strings.Join(o.Enum, "|")), o.Description)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(out, w.String())
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
