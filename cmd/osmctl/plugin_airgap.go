package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

func newPluginSaveCommand(p *pluginCommon) *cobra.Command {
	var (
		output   string
		profiles []string
	)
	cmd := &cobra.Command{
		Use:   "save [REFERENCE...] [-f profile.yaml...] -o BUNDLE.tar",
		Short: "Write plugin artifacts to a tarball, to carry them into an air-gapped site.",
		Long: `save pulls each plugin artifact (verified like every pull) and writes them all to one tar archive of an OCI
image layout. References may be given directly or collected from the spec.plugin.image of profiles (-f);
built-in plugins need no saving, they are embedded in the controller. Each saved artifact keeps its
repository path, its tag when one was given, and its digest, so "osmctl plugin load" restores them in
another registry under the same digests. Prints the saved references, pinned by digest.`,
		Example: `  osmctl plugin save registry.example.com/osm/myos:0.1.0 -o plugins.tar
  osmctl plugin save -f osp-myos.yaml -f osp-other.yaml -o plugins.tar`,
		RunE: func(cmd *cobra.Command, args []string) error {
			refs, err := collectReferences(args, profiles)
			if err != nil {
				return err
			}
			client, err := p.g.ociClient(&p.registry)
			if err != nil {
				return err
			}
			save := func(w io.Writer) error { return client.Save(cmd.Context(), refs, w) }
			if output == "-" {
				err = save(cmd.OutOrStdout())
			} else {
				err = writeFileAtomic(output, save)
			}
			if err != nil {
				return p.registry.explain(err)
			}
			var out strings.Builder
			printed := map[string]bool{}
			for _, ref := range refs {
				pinned, _, err := client.Resolve(cmd.Context(), ref)
				if err != nil {
					return p.registry.explain(err)
				}
				if printed[pinned] {
					continue // a tag and a digest of the same artifact
				}
				printed[pinned] = true
				if output == "-" {
					cmd.PrintErrln("osmctl: saved " + pinned)
				} else {
					out.WriteString(pinned + "\n")
				}
			}
			if output == "-" {
				return nil
			}
			cmd.PrintErrf("osmctl: saved %d plugin artifact(s) to %s\n", len(printed), output)
			_, err = io.WriteString(cmd.OutOrStdout(), out.String())
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", `Tar file to write ("-" for stdout).`)
	cmd.Flags().StringArrayVarP(&profiles, "filename", "f", nil, "OperatingSystemProfile YAML file whose plugin image to save (repeatable).")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

// collectReferences returns refs followed by the plugin images of the profiles, without duplicates.
func collectReferences(refs, profiles []string) ([]string, error) {
	out := slices.Clone(refs)
	for _, f := range profiles {
		osp := &osmv1alpha1.OperatingSystemProfile{}
		if err := readObject(f, osp); err != nil {
			return nil, err
		}
		if osp.Spec.Plugin == nil || osp.Spec.Plugin.Image == "" {
			continue // templates only or a built-in plugin: nothing to carry
		}
		out = append(out, osp.Spec.Plugin.Image)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 {
		return nil, errors.New("nothing to save: give plugin references, or profiles (-f) whose spec.plugin.image is set")
	}
	return out, nil
}

func newPluginLoadCommand(p *pluginCommon) *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "load BUNDLE.tar --to REGISTRY[/PREFIX]",
		Short: "Push the plugin artifacts of a tarball written by save into a registry.",
		Long: `load pushes every artifact of a tarball written by "osmctl plugin save" ("-" reads stdin) into the target
registry, keeping repository paths (below the optional prefix), tags and digests, verifies each one by
pulling it back, and prints the new references pinned by digest. Because digests do not change, a profile
only needs its registry host (and prefix) replaced to use the mirror.`,
		Example: `  osmctl plugin load plugins.tar --to registry.airgap.lan
  osmctl plugin load plugins.tar --to registry.airgap.lan/mirror`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					if errors.Is(err, os.ErrNotExist) {
						return fmt.Errorf("bundle %s does not exist", args[0])
					}
					return err
				}
				defer f.Close()
				in = f
			}
			client, err := p.g.ociClient(&p.registry)
			if err != nil {
				return err
			}
			pushed, err := client.Load(cmd.Context(), in, target)
			if err != nil {
				return p.registry.explain(err)
			}
			slices.Sort(pushed)
			pushed = slices.Compact(pushed)
			cmd.PrintErrf("osmctl: loaded %d plugin artifact(s) into %s\n", len(pushed), target)
			_, err = io.WriteString(cmd.OutOrStdout(), strings.Join(pushed, "\n")+"\n")
			return err
		},
	}
	cmd.Flags().StringVar(&target, "to", "", "Registry to push to, as host[:port][/path-prefix].")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func newPluginMirrorCommand(p *pluginCommon) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mirror SOURCE-REFERENCE DESTINATION-REPOSITORY[:TAG]",
		Short: "Copy a plugin artifact between registries, keeping its digest.",
		Long: `mirror verifies the source artifact like a pull, copies it to the destination repository and prints the
destination reference pinned by digest, which is the source's digest. Without a destination tag the
source's tag is kept; a source given by digest is copied by digest only. The same registry flags apply to
both registries.`,
		Example: `  osmctl plugin mirror registry.example.com/osm/myos:0.1.0 registry.airgap.lan/osm/myos`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := p.g.ociClient(&p.registry)
			if err != nil {
				return err
			}
			pinned, err := client.Copy(cmd.Context(), args[0], args[1])
			if err != nil {
				return p.registry.explain(err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), pinned)
			return err
		},
	}
	return cmd
}
