package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/osmhq/osm/host/migrate"
	"github.com/osmhq/osm/host/scheme"
)

// newMigrateCommand is `osmctl migrate`, the one osmctl command that talks to a cluster: going back from OSM to
// upstream OSM v1.11.2 (docs/migration.md, "Going back").
func newMigrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Move a cluster between upstream OSM v1.11.2 and OSM (see docs/migration.md).",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newMigrateBackCommand())
	return cmd
}

type migrateBackOptions struct {
	kubeconfig, context string
	opts                migrate.Options
	dryRun, force       bool
}

func newMigrateBackCommand() *cobra.Command {
	o := &migrateBackOptions{}
	cmd := &cobra.Command{
		Use:   "back [--dry-run] [--kubeconfig FILE]",
		Short: "Prepare a cluster OSM ran for upstream OSM v1.11.2 again.",
		Long: `back restores what upstream OSM v1.11.2 needs and removes what OSM wrote, with OSM's controller stopped and
before upstream's starts (docs/migration.md, "Going back"):

- upstream's getter: ServiceAccount, token Secret, Role and RoleBinding cloud-init-getter in the user-data
  namespace, as upstream's deploy/cloud-init-settings.yaml has them (upstream fails every MachineDeployment
  without the token);
- OSM's user-data Secrets (upstream never overwrites an existing one, so it writes its own only once they are
  gone), kubelet bootstrap Secrets and OperatingSystemConfigs;
- OSM's per-MachineDeployment bootstrap tokens and provisioning reader Roles and RoleBindings (nothing renews
  the tokens once OSM is gone).

Profiles that render through a plugin and that upstream does not replace with its own default render with
their templates only under upstream, without an error: each is reported with the MachineDeployments that name
it, and while any MachineDeployment does, back changes nothing unless --force is given.

--dry-run lists every change and warning and makes none. Exit status: 0 done (or nothing to do), 1 failed,
3 refused because of a profile that needs a plugin.`,
		Example: `  osmctl migrate back --dry-run
  osmctl migrate back --kubeconfig admin.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config).")
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one).")
	f.StringVarP(&o.opts.Namespace, "namespace", "n", "kube-system", "The controllers' -namespace (default profiles, OperatingSystemConfigs).")
	f.StringVar(&o.opts.UserDataNamespace, "user-data-namespace", "cloud-init-settings", "Namespace of the user-data Secrets and the getter.")
	f.DurationVar(&o.opts.TokenWait, "token-wait", 30*time.Second, "How long to wait for the token controller to fill a getter token Secret created here.")
	f.BoolVar(&o.opts.UpstreamDisablesDefaults, "upstream-disable-default-osps", false, "Upstream will run with -disable-default-osps (then OSM's default profiles are not replaced by upstream's).")
	f.BoolVar(&o.dryRun, "dry-run", false, "List what would change; change nothing.")
	f.BoolVar(&o.force, "force", false, "Go on although MachineDeployments name profiles upstream renders with their templates only.")
	return cmd
}

// exitRefused is the exit status of a plan with blocking warnings and no --force.
const exitRefused = 3

func (o *migrateBackOptions) run(cmd *cobra.Command) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	plan, err := migrate.NewPlan(cmd.Context(), c, o.opts)
	if err != nil {
		return err
	}
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	writeWarnings(errOut, plan)
	if plan.Blocking && !o.force && !o.dryRun {
		return exitError{code: exitRefused, err: errors.New("MachineDeployments name profiles that upstream would render with their templates only (above); change their profile annotations first, or pass --force")}
	}
	if o.dryRun {
		lines := []string{}
		for _, a := range plan.Actions {
			lines = append(lines, "would "+a.String())
		}
		if len(lines) == 0 {
			lines = []string{"nothing to change"}
		}
		_, err := fmt.Fprintln(out, strings.Join(lines, "\n"))
		return err
	}
	return plan.Apply(cmd.Context(), c, func(s string) { _, _ = fmt.Fprintln(out, s) })
}

func writeWarnings(w io.Writer, plan *migrate.Plan) {
	for _, x := range plan.Warnings {
		_, _ = fmt.Fprintln(w, "WARNING: "+x.String())
	}
}
