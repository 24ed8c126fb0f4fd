package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/osmhq/osm/sdk/abi"
)

// OCI annotation keys push sets from the plugin's metadata.
const (
	annotationTitle       = "org.opencontainers.image.title"
	annotationVersion     = "org.opencontainers.image.version"
	annotationDescription = "org.opencontainers.image.description"
)

func newPluginPushCommand(p *pluginCommon) *cobra.Command {
	var (
		quiet       bool
		annotations map[string]string
		pinProfile  string
	)
	cmd := &cobra.Command{
		Use:   "push FILE.wasm REGISTRY/REPOSITORY[:TAG]",
		Short: "Publish a plugin module as an OCI artifact and print the digest-pinned reference for profiles.",
		Long: `push checks the module the way the controller will (it loads it into the sandbox: ABI version, metadata,
exports), uploads it in the CNCF wasm artifact layout (config application/vnd.wasm.config.v0+json, one
application/wasm layer) with the plugin's name, version and description as annotations, and prints the
reference pinned by manifest digest and a spec.plugin snippet to paste into an OperatingSystemProfile.

The manifest has no timestamp, so pushing the same module again gives the same digest. Profiles must pin
the digest; the tag is for people.`,
		Example: `  osmctl plugin push myos.wasm registry.example.com/osm/myos:0.1.0
  REF=$(osmctl plugin push -q myos.wasm registry.example.com/osm/myos:0.1.0)`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !isFileArg(args[0]) {
				return fmt.Errorf("%s: push takes a module file (name.wasm); copy artifacts between registries with osmctl plugin mirror", args[0])
			}
			pm, err := p.load(cmd, args[0])
			if err != nil {
				return err
			}
			md := pm.Module.Metadata()
			ann := map[string]string{annotationTitle: md.Name, annotationVersion: md.Version}
			if md.Description != "" {
				ann[annotationDescription] = md.Description
			}
			for k, v := range annotations {
				ann[k] = v
			}
			client, err := p.g.ociClient(p.registry.forReference(args[1]))
			if err != nil {
				return err
			}
			if pinProfile != "" {
				// Fail before pushing on a profile that cannot take the reference.
				if _, err := pinProfileImage(pinProfile, "", true); err != nil {
					return err
				}
			}
			art, err := client.Push(cmd.Context(), args[1], pm.Wasm, ann)
			if err != nil {
				return p.registry.explain(err)
			}
			cmd.PrintErrf("osmctl: pushed plugin %s %s (module %s, %d bytes) to %s\n",
				md.Name, md.Version, pm.Module.Digest(), len(pm.Wasm), args[1])
			if pinProfile != "" {
				old, err := pinProfileImage(pinProfile, art.Reference, false)
				if err != nil {
					return err
				}
				cmd.PrintErrf("osmctl: %s: spec.plugin.image %s -> %s\n", pinProfile, old, art.Reference)
			}
			if quiet {
				_, err = fmt.Fprintln(cmd.OutOrStdout(), art.Reference)
				return err
			}
			return writeProfileSnippet(cmd.OutOrStdout(), art.Reference, md)
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "Print only the pinned reference.")
	cmd.Flags().StringToStringVar(&annotations, "annotation", nil, "Extra manifest annotation key=value (repeatable).")
	cmd.Flags().StringVar(&pinProfile, "pin-profile", "", "OperatingSystemProfile file whose spec.plugin.image is set to the pushed reference, pinned by digest (the rest of the file is kept as written).")
	return cmd
}

// writeProfileSnippet prints the pinned reference and the spec.plugin block that uses it, with the plugin's
// config keys as comments, and its plugin secrets (options of type secret, which are not config keys) as
// spec.plugin.secrets entries to fill in.
func writeProfileSnippet(out io.Writer, ref string, md abi.Metadata) error {
	var w strings.Builder
	fmt.Fprintf(&w, "%s\n\n# spec.plugin for an OperatingSystemProfile (%s %s):\nspec:\n  plugin:\n    image: %s\n", ref, md.Name, md.Version, ref)
	var config, secrets []abi.ConfigOption
	for _, o := range md.ConfigSchema {
		if o.Type == abi.ConfigSecret {
			secrets = append(secrets, o)
		} else {
			config = append(config, o)
		}
	}
	if len(config) > 0 {
		w.WriteString("    # config:\n")
	}
	for _, o := range config {
		note := o.Description
		switch {
		case o.Required:
			note += " (required)"
		case o.Default != "":
			note += " (default)"
		}
		if o.Type != "" && o.Type != abi.ConfigString && o.Type != abi.ConfigEnum {
			note += " (" + o.Type + ")"
		}
		if len(o.Enum) > 0 {
			note += fmt.Sprintf(" (one of %v)", o.Enum)
		}
		fmt.Fprintf(&w, "    #   %s: %s  # %s\n", o.Name, strconv.Quote(o.Default), note)
	}
	if len(secrets) > 0 {
		w.WriteString("    # secrets:\n")
	}
	for _, o := range secrets {
		note := o.Description
		if o.Required {
			note += " (required)"
		}
		fmt.Fprintf(&w, "    #   - name: %s\n    #     secretRef: {name: <Secret in the profile's namespace>, key: <key>}  # %s\n", o.Name, note)
	}
	_, err := io.WriteString(out, w.String())
	return err
}

func newPluginPullCommand(p *pluginCommon) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "pull REFERENCE -o FILE.wasm",
		Short: "Download a plugin module from a registry, verified against its digests.",
		Long: `pull resolves the reference (a tag is resolved once, to the digest that is downloaded), checks that the
artifact is a wasm plugin and that the manifest and the module match their digests, writes the module to the
output file ("-" for stdout) and prints the reference pinned by digest.`,
		Example: `  osmctl plugin pull registry.example.com/osm/myos:0.1.0 -o myos.wasm`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := p.g.ociClient(p.registry.forReference(args[0]))
			if err != nil {
				return err
			}
			art, err := client.Pull(cmd.Context(), args[0])
			if err != nil {
				return p.registry.explain(err)
			}
			if output == "-" {
				_, err := cmd.OutOrStdout().Write(art.Module)
				return err
			}
			if err := writeFileAtomic(output, func(w io.Writer) error { _, err := w.Write(art.Module); return err }); err != nil {
				return err
			}
			cmd.PrintErrf("osmctl: wrote module %s (%d bytes) to %s\n", art.ModuleDigest, len(art.Module), output)
			_, err = fmt.Fprintln(cmd.OutOrStdout(), art.Reference)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", `File to write the module to ("-" for stdout).`)
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

// writeFileAtomic writes a file through a temporary file in the same directory, so a failed download or
// save never leaves a truncated file behind.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
