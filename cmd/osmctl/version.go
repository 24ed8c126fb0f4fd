package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/osmhq/osm/host/buildinfo"
)

func newVersionCommand(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print osmctl's version, commit and Go version.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			i := buildinfo.Get()
			switch output {
			case "text":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), i.String())
				return err
			case "json":
				return json.NewEncoder(cmd.OutOrStdout()).Encode(i)
			}
			return fmt.Errorf("unknown output %q: use text or json", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text or json.")
	return cmd
}
