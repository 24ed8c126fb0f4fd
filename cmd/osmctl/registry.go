package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
)

// flagSet is the part of a cobra command's flag set the option structs register on.
type flagSet interface {
	StringVar(p *string, name, value, usage string)
	BoolVar(p *bool, name string, value bool, usage string)
	MarkHidden(name string) error
}

// registryFlags are how osmctl reaches OCI registries: credentials from a docker config file (credential
// helpers included), extra CAs, and the TLS escape hatches for labs.
type registryFlags struct {
	configFile string
	caFile     string
	insecure   bool
	plainHTTP  bool
	// names of the flags, for messages
	configFlag, caFlag, insecureFlag, plainHTTPFlag string
}

// Names of the registry flags. Every command that talks to a registry accepts the controller's names
// (--plugin-registry-*), so one spelling works across render, lint, diff and plugin; the plugin commands,
// which talk to registries only, also offer the short names, which render cannot (its --ca-file is the
// cluster CA).
const (
	flagRegistryConfig    = "plugin-registry-config"
	flagRegistryCA        = "plugin-registry-ca-bundle"
	flagRegistryInsecure  = "plugin-registry-insecure"
	flagRegistryPlainHTTP = "plugin-registry-plain-http"
)

// addFlags registers the flags: the controller's names everywhere, and with shortNames also --registry-config,
// --ca-file, --insecure-skip-tls-verify and --plain-http as the names shown in help (the long ones are then
// hidden aliases).
func (r *registryFlags) addFlags(fs flagSet, shortNames bool) {
	r.configFlag, r.caFlag, r.insecureFlag, r.plainHTTPFlag = flagRegistryConfig, flagRegistryCA, flagRegistryInsecure, flagRegistryPlainHTTP
	const (
		configUsage = "Docker config file with registry credentials, credential helpers included (default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json)."
		caUsage     = "PEM file with CA certificates to trust for registries, in addition to the system's."
		insUsage    = "Do not verify registry certificates (labs only)."
		plainUsage  = "Talk plain HTTP to registries instead of HTTPS (labs and in-cluster mirrors). Registries on localhost, 127.0.0.1 and [::1] get plain HTTP without it, as with docker."
	)
	fs.StringVar(&r.configFile, flagRegistryConfig, "", configUsage)
	fs.StringVar(&r.caFile, flagRegistryCA, "", caUsage)
	fs.BoolVar(&r.insecure, flagRegistryInsecure, false, insUsage)
	fs.BoolVar(&r.plainHTTP, flagRegistryPlainHTTP, false, plainUsage)
	if !shortNames {
		return
	}
	r.configFlag, r.caFlag, r.insecureFlag, r.plainHTTPFlag = "registry-config", "ca-file", "insecure-skip-tls-verify", "plain-http"
	fs.StringVar(&r.configFile, r.configFlag, "", configUsage)
	fs.StringVar(&r.caFile, r.caFlag, "", caUsage)
	fs.BoolVar(&r.insecure, r.insecureFlag, false, insUsage)
	fs.BoolVar(&r.plainHTTP, r.plainHTTPFlag, false, plainUsage)
	for _, n := range []string{flagRegistryConfig, flagRegistryCA, flagRegistryInsecure, flagRegistryPlainHTTP} {
		_ = fs.MarkHidden(n)
	}
}

// forReference returns the flags to reach ref's registry with. A registry on this machine that does not
// speak TLS is reached over plain HTTP without a flag, as docker does; one that speaks TLS, or that a CA file
// or --plugin-registry-insecure is given for, keeps HTTPS (and its certificate errors and their hints).
func (r *registryFlags) forReference(ref string) *registryFlags {
	out := *r
	if host, _, _ := strings.Cut(ref, "/"); !r.plainHTTP && r.caFile == "" && !r.insecure && localRegistry(host) && !speaksTLS(host) {
		out.plainHTTP = true
	}
	return &out
}

// speaksTLS reports whether the registry at host (a local one) answers a TLS handshake. The probe sends no
// request and trusts nothing it learns beyond "this port speaks TLS", which is why it skips verification;
// the real connection verifies as configured. A port that cannot be reached counts as plain HTTP, so the
// error the user sees names the address osmctl would use.
func speaksTLS(host string) bool {
	if !strings.Contains(strings.TrimPrefix(host, "["), "]:") && strings.Count(host, ":") != 1 {
		host += ":443"
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", host, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a probe for TLS, no data is exchanged
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// localRegistry reports whether a registry host is the local machine, which docker and osmctl reach over
// plain HTTP without a flag: a registry started with `docker run registry` or `zot` listens there without TLS.
func localRegistry(host string) bool {
	h := host
	if i := strings.LastIndex(h, ":"); i >= 0 && !strings.HasSuffix(h, "]") {
		h = h[:i]
	}
	h = strings.Trim(h, "[]")
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}

// dockerConfigFile is the docker config to read: the flag's file, which must exist, or the default one,
// which may be missing (no credentials).
func (r *registryFlags) dockerConfigFile() (string, error) {
	if r.configFile == "" {
		return oci.DefaultDockerConfigFile(), nil
	}
	if _, err := os.Stat(r.configFile); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("--%s: %s does not exist", r.configFlag, r.configFile)
		}
		return "", fmt.Errorf("--%s: %w", r.configFlag, err)
	}
	return r.configFile, nil
}

func (r *registryFlags) caBundle() ([]byte, error) {
	if r.caFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(r.caFile)
	if err != nil {
		return nil, fmt.Errorf("registry CA file: %w", err)
	}
	return data, nil
}

// options are the settings for an oci.Client.
func (r *registryFlags) options() (oci.Options, error) {
	file, err := r.dockerConfigFile()
	if err != nil {
		return oci.Options{}, err
	}
	ca, err := r.caBundle()
	if err != nil {
		return oci.Options{}, err
	}
	return oci.Options{DockerConfigFile: file, CABundle: ca, InsecureSkipTLSVerify: r.insecure, PlainHTTP: r.plainHTTP}, nil
}

// registryConfig is the plugin manager's view of the same settings; credentials travel per reference.
func (r *registryFlags) registryConfig() (plugin.RegistryConfig, error) {
	if _, err := r.dockerConfigFile(); err != nil {
		return plugin.RegistryConfig{}, err
	}
	ca, err := r.caBundle()
	if err != nil {
		return plugin.RegistryConfig{}, err
	}
	return plugin.RegistryConfig{CABundle: ca, InsecureSkipTLSVerify: r.insecure, PlainHTTP: r.plainHTTP}, nil
}

// explain adds the fix to registry errors that osmctl's flags or the docker config can fix.
func (r *registryFlags) explain(err error) error {
	if err == nil {
		return nil
	}
	file, _ := r.dockerConfigFile()
	var (
		resp    *errcode.ErrorResponse
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
		host    x509.HostnameError
	)
	switch {
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		return fmt.Errorf("%w: the registry requires credentials and %s has none for it; run docker login or pass --%s", err, file, r.configFlag)
	case errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
		return fmt.Errorf("%w: check the credentials for %s in %s", err, resp.URL.Host, file)
	case errors.Is(err, http.ErrSchemeMismatch):
		return fmt.Errorf("%w: the registry speaks plain HTTP; pass --%s", err, r.plainHTTPFlag)
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &host):
		return fmt.Errorf("%w: trust the registry's CA with --%s (or, in a lab, --%s)", err, r.caFlag, r.insecureFlag)
	}
	return err
}

// localDockerConfig names the pull secret osmctl hands the plugin manager: there is no cluster to read a
// profile's pullSecret from, so every image is pulled with the local docker config's credentials.
const localDockerConfig = "local docker config"

// cliSource resolves profile plugins like the controller (a plugin.Resolver over a plugin.Manager), with registry
// credentials from the docker config instead of pull Secrets.
type cliSource struct {
	manager  *plugin.Manager
	registry *registryFlags
	// local returns a manager reaching registries on this machine over plain HTTP (see forReference); nil
	// when the flags already decide.
	local func() (*plugin.Manager, error)
}

var _ render.PluginSource = (*cliSource)(nil)

func (s *cliSource) Resolve(ctx context.Context, namespace string, ref *osmv1alpha1.PluginReference) (render.Plugin, error) {
	if ref.Image == "" {
		return (&plugin.Resolver{Manager: s.manager}).Resolve(ctx, namespace, ref)
	}
	creds, err := s.credentials(ctx, ref.Image)
	if err != nil {
		return nil, &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: fmt.Errorf("plugin %s: %w", ref.Image, err)}
	}
	withCreds := *ref
	withCreds.PullSecret = localDockerConfig
	manager := s.manager
	if s.local != nil && s.registry.forReference(ref.Image).plainHTTP && !s.registry.plainHTTP {
		if manager, err = s.local(); err != nil {
			return nil, err
		}
	}
	src := &plugin.Resolver{Manager: manager, PullSecret: func(context.Context, string, string) ([]byte, error) { return creds, nil }, WaitForPulls: true}
	p, err := src.Resolve(ctx, namespace, &withCreds)
	var re *render.Error
	if errors.As(err, &re) {
		re.Err = s.registry.explain(re.Err)
	}
	return p, err
}

// credentials returns the docker config's credentials for the image's registry, as pull Secret content.
func (s *cliSource) credentials(ctx context.Context, image string) ([]byte, error) {
	file, err := s.registry.dockerConfigFile()
	if err != nil {
		return nil, err
	}
	ref, err := registry.ParseReference(image)
	if err != nil {
		// The manager reports the malformed reference itself, naming the field.
		return []byte(`{"auths":{}}`), nil
	}
	return oci.DockerConfigFor(ctx, file, ref.Registry)
}
