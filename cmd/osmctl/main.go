// Command osmctl is OSM's CLI for operators and plugin authors: offline rendering, profile linting and plugin
// OCI tooling. Everything it does works without a cluster.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(exit.code)
		}
		fmt.Fprintln(os.Stderr, "osmctl: "+err.Error())
		os.Exit(1)
	}
}

// exitError ends the program with a code after the command already reported what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRootCommand() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "osmctl",
		Short:         "Render, lint and ship OSM operating system profiles and plugins, offline.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	g.addFlags(root)
	root.AddCommand(newRenderCommand(g), newLintCommand(g))
	return root
}
