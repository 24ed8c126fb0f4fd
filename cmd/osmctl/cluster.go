package main

import (
	_ "embed"
	"os"

	"github.com/spf13/pflag"

	"github.com/osmhq/osm/host/render"
)

// exampleCA is a throwaway CA certificate (its key was discarded) so offline renders work without a cluster.
//
//go:embed example-ca.pem
var exampleCA string

// clusterFlags describe the cluster an offline render pretends nodes join.
type clusterFlags struct {
	server, caFile string
}

// addFlags registers --server and, when withCA, --ca-file (plugin commands use --ca-file for registries).
func (c *clusterFlags) addFlags(f *pflag.FlagSet, withCA bool, serverHelp string) {
	f.StringVar(&c.server, "server", "https://api.cluster.example:6443", serverHelp)
	if withCA {
		f.StringVar(&c.caFile, "ca-file", "", "Cluster CA certificate file; default: an example CA.")
	}
}

// info returns the cluster info for the renderer.
func (c *clusterFlags) info() (render.ClusterInfo, error) {
	ca := exampleCA
	if c.caFile != "" {
		data, err := os.ReadFile(c.caFile)
		if err != nil {
			return render.ClusterInfo{}, err
		}
		ca = string(data)
	}
	return render.ClusterInfo{ServerURL: c.server, CACert: ca}, nil
}
