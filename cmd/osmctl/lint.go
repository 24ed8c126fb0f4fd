package main

import (
	"flag"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/validation"
	"github.com/osmhq/osm/plugins"
)

func newLintCommand(g *globals) *cobra.Command {
	var files []string
	var node render.NodeFlags
	var registry registryFlags
	var pluginFile string
	cmd := &cobra.Command{
		Use:   "lint -f profile.yaml [-f extension.yaml ...]",
		Short: "Check OperatingSystemProfiles and their extensions the way the admission webhook does, offline.",
		Long: `lint checks each profile: its fields, that every template parses and renders, that its plugin resolves
and supports the profile's OS, version, provisioning utility and cloud providers, and that a sample machine of
every supported cloud provider renders, with a bootstrap stage small enough for every provider. An
OperatingSystemProfileExtension is checked against the embedded default profiles and the profiles given with
-f, together with the other extensions given: it must render with every profile it selects, without a
conflict it does not declare as an override. Each problem is printed on one line that names the field; the
exit status is 1 when any profile has a problem. Warnings (such as a download that skips TLS verification,
curl -k) are printed the same way after "warning:" and do not fail the profile. Plugin images are pulled with
the credentials of the local docker config and the --plugin-registry-* settings; --plugin-file checks the
profiles against a local plugin module instead of their plugin.`,
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
			xv := &validation.ExtensionValidator{Plugins: src, Settings: settings}
			profiles, extensions, err := lintSet(files)
			if err != nil {
				return err
			}
			bad := 0
			for _, f := range files {
				if kind, err := kindOf(f); err == nil && kind == "OperatingSystemProfileExtension" {
					x := extensions[f]
					errs := xv.Validate(cmd.Context(), &x, profiles, slices.Collect(maps.Values(extensions)))
					for _, e := range errs {
						cmd.PrintErrf("%s: %s\n", f, e.Error())
					}
					if len(errs) > 0 {
						bad++
						continue
					}
					_, _ = fmt.Fprintf(cmd.OutOrStdout(), "%s: extension %s is valid\n", f, x.Name)
					continue
				}
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
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "OperatingSystemProfile or OperatingSystemProfileExtension YAML file (repeatable).")
	_ = cmd.MarkFlagRequired("filename")
	gofs := flag.NewFlagSet("node", flag.ContinueOnError)
	node.AddFlags(gofs)
	cmd.Flags().AddGoFlagSet(gofs)
	registry.addFlags(cmd.Flags(), false)
	cmd.Flags().StringVar(&pluginFile, pluginFileFlag, "", pluginFileUsage)
	return cmd
}

// lintSet reads the profiles and extensions of one lint run: the extensions are checked against the embedded
// default profiles and the profiles given, all taken as living in one namespace (the one of the default
// profiles), as the controller would see them in -namespace.
func lintSet(files []string) ([]osmv1alpha1.OperatingSystemProfile, map[string]osmv1alpha1.OperatingSystemProfileExtension, error) {
	const ns = "kube-system"
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]osmv1alpha1.OperatingSystemProfile{}
	for _, d := range defaults {
		byName[d.Name] = *d
	}
	extensions := map[string]osmv1alpha1.OperatingSystemProfileExtension{}
	for _, f := range files {
		kind, err := kindOf(f)
		if err != nil {
			continue // reported where the file is linted
		}
		switch kind {
		case "OperatingSystemProfileExtension":
			xs, err := readExtensions([]string{f}, ns)
			if err != nil {
				return nil, nil, err
			}
			extensions[f] = xs[0]
		case "OperatingSystemProfile":
			osp := osmv1alpha1.OperatingSystemProfile{}
			if readObject(f, &osp) == nil {
				byName[osp.Name] = osp // a given profile replaces the default of the same name
			}
		}
	}
	profiles := make([]osmv1alpha1.OperatingSystemProfile, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		osp := byName[name]
		osp.Namespace = ns
		profiles = append(profiles, osp)
	}
	return profiles, extensions, nil
}
