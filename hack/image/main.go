// Command image builds OSM's container image without a container daemon: osm-controller and osmctl built
// static, in one layer with upstream OSM's binary paths (/usr/local/bin/osm-controller, /usr/local/bin/webhook),
// pushed to a registry or written to an OCI image layout directory (which crane, skopeo and podman read).
//
//	go run ./hack/image -version v0.1.0 -push ghcr.io/osmhq/osm-controller:v0.1.0
//	go run ./hack/image -version v0.1.0 -oci-layout dist/image
//
// Run hack/build-plugins.sh first (make image does): the controller embeds the default plugins. Registry
// credentials come from REGISTRY_USERNAME and REGISTRY_PASSWORD.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/retry"
)

func main() {
	o := Options{}
	var push, layout string
	var plainHTTP, now bool
	flag.StringVar(&o.Version, "version", "", "Release version stamped into the binaries and the image (required).")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "GOARCH of the image (linux).")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to put into the image.")
	flag.StringVar(&push, "push", "", "Push the image to this reference (registry/repository:tag).")
	flag.StringVar(&layout, "oci-layout", "", "Write the image to this OCI image layout directory, tagged with -version.")
	flag.BoolVar(&plainHTTP, "plain-http", false, "Push over plain HTTP.")
	flag.BoolVar(&now, "now", false, "Stamp the current time as the creation time (default: the zero time, reproducible).")
	flag.Parse()
	if o.Version == "" || (push == "" && layout == "") {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/image -version vX.Y.Z (-push REF | -oci-layout DIR)")
		os.Exit(2)
	}
	if now {
		o.Created = time.Now().UTC()
	}
	if err := run(context.Background(), o, push, layout, plainHTTP); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o Options, push, layout string, plainHTTP bool) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	o.Root = root
	dir, err := os.MkdirTemp("", "osm-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bins, err := Binaries(o, dir)
	if err != nil {
		return err
	}
	b, err := Image(o, bins)
	if err != nil {
		return err
	}
	if layout != "" {
		store, err := oci.New(layout)
		if err != nil {
			return err
		}
		if err := Push(ctx, store, b, o.Version); err != nil {
			return err
		}
		fmt.Printf("%s:%s %s\n", layout, o.Version, b.ManifestDesc.Digest)
	}
	if push != "" {
		i := strings.LastIndex(push, ":")
		if i < 0 || strings.Contains(push[i+1:], "/") {
			return fmt.Errorf("-push %q: want registry/repository:tag", push)
		}
		ref, tag := push[:i], push[i+1:]
		repo, err := remote.NewRepository(ref)
		if err != nil {
			return err
		}
		repo.PlainHTTP = plainHTTP
		client := &auth.Client{Client: retry.DefaultClient, Cache: auth.NewCache()}
		if u := os.Getenv("REGISTRY_USERNAME"); u != "" {
			client.Credential = auth.StaticCredential(repo.Reference.Registry, auth.Credential{Username: u, Password: os.Getenv("REGISTRY_PASSWORD")})
		}
		repo.Client = client
		if err := Push(ctx, repo, b, tag); err != nil {
			return err
		}
		fmt.Printf("%s@%s\n", ref, b.ManifestDesc.Digest)
	}
	return nil
}
