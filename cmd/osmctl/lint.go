package main

import (
	"flag"
	"fmt"

	"github.com/spf13/cobra"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/validation"
)

func newLintCommand(g *globals) *cobra.Command {
	var files []string
	var node render.NodeFlags
	var registry registryFlags
	var pluginFile string
	cmd := &cobra.Command{
		Use:   "lint -f profile.yaml [-f other.yaml ...]",
		Short: "Check OperatingSystemProfiles the way the admission webhook does, offline.",
		Long: `lint checks each profile: its fields, that every template parses and renders, that its plugin resolves
and supports the profile's OS, version, provisioning utility and cloud providers, and that a sample machine of
every supported cloud provider renders, with a bootstrap stage small enough for every provider. Each problem is
printed on one line that names the field; the exit status is 1 when any profile has a problem. Warnings (such
as a download that skips TLS verification, curl -k) are printed the same way after "warning:" and do not fail
the profile. Plugin images are pulled with the credentials of the local docker config and the
--plugin-registry-* settings; --plugin-file checks the profiles against a local plugin module instead of their
plugin.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			settings, err := node.Settings(render.DefaultSettings())
			if err != nil {
				return err
			}
			var src render.PluginSource
			if pluginFile != "" {
				src, err = g.fileSource(cmd, pluginFile)
			} else {
				src, err = g.source(cmd, &registry)
			}
			if err != nil {
				return err
			}
			v := &validation.ProfileValidator{Plugins: src, Settings: settings}
			bad := 0
			for _, f := range files {
				osp := &osmv1alpha1.OperatingSystemProfile{}
				if err := readObject(f, osp); err != nil {
					cmd.PrintErrf("%v\n", err)
					bad++
					continue
				}
				if pluginFile != "" {
					if err := withPluginFile(osp, pluginFile); err != nil {
						cmd.PrintErrf("%s: %v\n", f, err)
						bad++
						continue
					}
				}
				for _, w := range validation.Warnings(osp) {
					cmd.PrintErrf("%s: warning: %s\n", f, w)
				}
				errs := v.Validate(cmd.Context(), osp)
				for _, e := range errs {
					cmd.PrintErrf("%s: %s\n", f, e.Error())
				}
				if len(errs) > 0 {
					bad++
					continue
				}
				_, _ = fmt.Fprintf(cmd.OutOrStdout(), "%s: profile %s %s is valid\n", f, osp.Name, osp.Spec.Version)
			}
			if bad > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "OperatingSystemProfile YAML file (repeatable).")
	_ = cmd.MarkFlagRequired("filename")
	gofs := flag.NewFlagSet("node", flag.ContinueOnError)
	node.AddFlags(gofs)
	cmd.Flags().AddGoFlagSet(gofs)
	registry.addFlags(cmd.Flags(), false)
	cmd.Flags().StringVar(&pluginFile, pluginFileFlag, "", pluginFileUsage)
	return cmd
}
