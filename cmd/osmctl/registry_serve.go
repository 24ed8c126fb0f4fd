package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/spf13/cobra"
)

// newRegistryCommand is `osmctl registry`: tools for plugin authors' registries.
func newRegistryCommand(*globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "A local OCI registry for plugin authors.",
	}
	cmd.AddCommand(newRegistryServeCommand())
	return cmd
}

func newRegistryServeCommand() *cobra.Command {
	var addr, blobDir string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve an OCI registry on this machine (plain HTTP) to push plugins to and render from.",
		Long: `serve runs an OCI distribution registry (go-containerregistry's) until it is interrupted, for trying a plugin
before it is published: osmctl plugin push, render and lint reach a registry on localhost or 127.0.0.1 over
plain HTTP without any flag, which is what osmctl plugin init's scaffold pushes to (localhost:5000).

Manifests and tags live in memory and are gone when it stops; blobs too, unless --blob-dir keeps them on disk.
It has no authentication and listens on 127.0.0.1 by default: do not expose it.`,
		Example: `  osmctl registry serve &
  make push      # in a scaffolded plugin: osmctl plugin push --pin-profile osp.yaml myos.wasm localhost:5000/osm/myos:0.1.0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("registry serve: %w", err)
			}
			return serveRegistry(ctx, ln, blobDir, func(a string) {
				cmd.PrintErrf("osmctl: serving an OCI registry on http://%s (in memory; Ctrl-C stops it)\n", a)
			})
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:5000", "Address to listen on.")
	cmd.Flags().StringVar(&blobDir, "blob-dir", "", "Directory to keep blobs in (default: memory).")
	return cmd
}

// serveRegistry serves a registry on ln until ctx ends.
func serveRegistry(ctx context.Context, ln net.Listener, blobDir string, ready func(addr string)) error {
	opts := []registry.Option{registry.Logger(log.New(os.Stderr, "osmctl registry: ", log.LstdFlags))}
	if blobDir != "" {
		if err := os.MkdirAll(blobDir, 0o755); err != nil {
			return err
		}
		opts = append(opts, registry.WithBlobHandler(registry.NewDiskBlobHandler(blobDir)))
	}
	srv := &http.Server{Handler: registry.New(opts...), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
