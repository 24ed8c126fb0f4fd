// Command osmctl is OSM's CLI for operators and plugin authors: offline rendering, profile linting, diffs between
// profile versions and plugin OCI tooling. Everything it does works without a cluster.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/osmhq/osm/host/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// annotationErrorExitCode on a command sets the exit status of its errors (diff uses 2, like diff(1)).
const annotationErrorExitCode = "osmctl/error-exit-code"

// exitError ends the program with a code. Without err the command has already reported what went wrong.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("exit status %d", e.code)
}

func (e exitError) Unwrap() error { return e.err }

// detailedError is a one-line error with supporting text (a plugin's stderr) printed after it.
type detailedError struct {
	err    error
	detail string
}

func (e *detailedError) Error() string { return e.err.Error() }
func (e *detailedError) Unwrap() error { return e.err }

// run executes osmctl with args and returns the exit status. Errors are printed as one line on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{}
	defer g.close()
	// A user waits for each command's answer: every plugin image is pulled before a command renders with it
	// (each pull bounded by the pull timeout), never reported "still being pulled" as the controller's
	// reconciles are. Profiles resolve through cliSource, which asks for that too; extensions' plugins do not.
	ctx = plugin.WaitForPulls(ctx)
	root := newRootCommand(g)
	root.SetArgs(controllerSpelling(root, args))
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	code := 1
	if cmd != nil {
		if c, err := strconv.Atoi(cmd.Annotations[annotationErrorExitCode]); err == nil {
			code = c
		}
	}
	var exit exitError
	if errors.As(err, &exit) {
		if exit.err == nil {
			return exit.code
		}
		code = exit.code
	}
	_, _ = fmt.Fprintln(stderr, "osmctl: "+oneLine(err.Error()))
	var detailed *detailedError
	if errors.As(err, &detailed) && detailed.detail != "" {
		for _, line := range strings.Split(strings.TrimRight(detailed.detail, "\n"), "\n") {
			_, _ = fmt.Fprintln(stderr, "    "+line)
		}
	}
	return code
}

// controllerSpelling accepts the controller's single-dash spelling of long flags (-node-registry-mirrors=...),
// so its flags can be pasted: an argument -name or -name=value whose name is a long flag of the command becomes
// --name. Single-letter flags and their clusters (-q, -vq) are left alone.
func controllerSpelling(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil {
		return args
	}
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "="); len(name) > 1 && a[0] == '-' && a[1] != '-' &&
			(cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil) {
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}

// oneLine joins the lines of a message, so every error is one line an operator can grep for.
func oneLine(s string) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

func newRootCommand(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "osmctl",
		Short: "Render, lint, diff and ship OSM operating system profiles and plugins, offline.",
		Long: `osmctl renders and checks OperatingSystemProfiles exactly as the OSM controller does, shows what a new
profile version changes on nodes, and builds, runs, publishes and mirrors OS plugins. It needs no cluster:
the default profiles and plugins are embedded, and plugin images come from OCI registries or files. Only
"osmctl migrate" reads and writes a cluster.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	g.addFlags(root)
	root.AddCommand(newRenderCommand(g), newLintCommand(g), newDiffCommand(g), newPluginCommand(g), newRegistryCommand(g), newVersionCommand(g), newProfileCommand(g), newUpstreamOverlayCommand(), newMigrateCommand())
	root.SetFlagErrorFunc(suggestFlag)
	return root
}
