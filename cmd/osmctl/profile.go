package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/osmhq/osm/plugins"
)

func newProfileCommand(_ *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "List and export the default OperatingSystemProfiles embedded in osmctl (the controller ships the same).",
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the embedded default profiles.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			osps, err := plugins.DefaultProfiles()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			_, _ = fmt.Fprintln(w, "NAME\tOS\tVERSION\tPROFILE VERSION\tUTILITY\tPLUGIN")
			for _, o := range osps {
				plugin := "-"
				if o.Spec.Plugin != nil {
					plugin = o.Spec.Plugin.Builtin
				}
				_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Name, o.Spec.OSName, o.Spec.OSVersion, o.Spec.Version, o.Spec.ProvisioningUtility, plugin)
			}
			return w.Flush()
		},
	}
	var namespace string
	export := &cobra.Command{
		Use:   "export NAME",
		Short: "Print an embedded default profile's YAML, comments included: the start of a profile of your own.",
		Example: `  osmctl profile export osp-ubuntu > osp-ubuntu-site.yaml   # then rename it and change what you need
  osmctl profile export osp-debian --namespace kube-system | kubectl apply -f -`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("export takes one profile name, one of %s", strings.Join(plugins.DefaultProfileNames(), ", "))
			}
			return nil
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return plugins.DefaultProfileNames(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := plugins.DefaultProfileYAML(args[0])
			if err != nil {
				if s := closest(args[0], plugins.DefaultProfileNames()); s != "" {
					return fmt.Errorf("%w; did you mean %s?", err, s)
				}
				return err
			}
			out := string(data)
			if namespace != "" {
				out = strings.Replace(out, "\n  name: "+args[0]+"\n", "\n  name: "+args[0]+"\n  namespace: "+namespace+"\n", 1)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	export.Flags().StringVarP(&namespace, "namespace", "n", "", "Set metadata.namespace (the controller's -namespace for profiles it should find by default).")
	cmd.AddCommand(list, export)
	return cmd
}

// closest returns the candidate nearest to s by edit distance, if it is near enough to be a typo.
func closest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+2
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// suggestFlag adds "did you mean --x?" to an unknown-flag error, naming the command's flag the typo was nearest.
func suggestFlag(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var name string
	switch {
	case strings.HasPrefix(msg, "unknown flag: --"):
		name = strings.TrimPrefix(msg, "unknown flag: --")
	case strings.HasPrefix(msg, "unknown shorthand flag: "):
		return fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())
	default:
		return err
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if s := closest(name, names); s != "" {
		return fmt.Errorf("%w; did you mean --%s?", err, s)
	}
	return fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())
}
