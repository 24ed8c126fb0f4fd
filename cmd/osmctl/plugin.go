package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing/fstest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/sdk/runtime"
)

// pluginCommon is what the plugin subcommands share: the globals and the registry flags.
type pluginCommon struct {
	g        *globals
	registry registryFlags
}

func newPluginCommand(g *globals) *cobra.Command {
	p := &pluginCommon{g: g}
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Run, inspect, publish and mirror OS plugins (WebAssembly modules shipped as OCI artifacts).",
		Long: `plugin works with OSM plugins: WebAssembly modules built with the SDK (sdk/README.md) and shipped through OCI
registries in the CNCF wasm artifact layout. A PLUGIN argument is a module file (name.wasm) or an OCI
reference (registry.example.com/osm/name:tag or @sha256:...).

Every subcommand that talks to a registry reads credentials from the docker config (docker login, credential
helpers included): --registry-config, else $DOCKER_CONFIG/config.json, else ~/.docker/config.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	p.registry.addFlags(cmd.PersistentFlags(), true)
	cmd.AddCommand(
		newPluginInitCommand(p),
		newPluginRunCommand(p),
		newPluginInspectCommand(p),
		newPluginPushCommand(p),
		newPluginPullCommand(p),
		newPluginSaveCommand(p),
		newPluginLoadCommand(p),
		newPluginMirrorCommand(p),
		newPluginSignCommand(p),
		newPluginVerifyCommand(p),
	)
	return cmd
}

// pluginModule is a plugin named on the command line, loaded into the plugin host with production limits.
type pluginModule struct {
	Module *plugin.Plugin
	// Wasm is the module's bytes.
	Wasm []byte
	// Source is the file, or the reference pinned by digest.
	Source string
	// Artifact is the pulled artifact; nil for a file.
	Artifact *oci.Artifact
}

// isFileArg tells a module file from an OCI reference: an existing path, or anything that looks like one.
func isFileArg(arg string) bool {
	if _, err := os.Stat(arg); err == nil {
		return true
	}
	return strings.HasSuffix(arg, ".wasm") || strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, "./") || strings.HasPrefix(arg, "../")
}

// fetch reads the module bytes of arg: a file, a built-in plugin's name (ubuntu, flatcar, ...) or a registry
// reference.
func (p *pluginCommon) fetch(ctx context.Context, arg string) (*pluginModule, error) {
	if !isFileArg(arg) && !strings.ContainsAny(arg, "/:@.") {
		if wasm, err := fs.ReadFile(plugins.Builtin(), arg+".wasm"); err == nil {
			return &pluginModule{Wasm: wasm, Source: "builtin:" + arg}, nil
		}
		names, _ := plugins.Names(plugins.Builtin())
		return nil, fmt.Errorf("%q is neither a module file, a registry reference nor a built-in plugin (built-in: %s)", arg, strings.Join(names, ", "))
	}
	if isFileArg(arg) {
		wasm, err := readModuleFile(arg)
		if err != nil {
			return nil, err
		}
		return &pluginModule{Wasm: wasm, Source: arg}, nil
	}
	client, err := p.g.ociClient(p.registry.forReference(arg))
	if err != nil {
		return nil, err
	}
	art, err := client.Pull(ctx, arg)
	if err != nil {
		return nil, p.registry.explain(err)
	}
	return &pluginModule{Wasm: art.Module, Source: art.Reference, Artifact: art}, nil
}

// load fetches arg and loads it into a plugin host process with the controller's limits, through the plugin
// manager the controller uses: the host checks the ABI version, the metadata and the required exports, and a
// hostile module can take down only that process, never osmctl.
func (p *pluginCommon) load(cmd *cobra.Command, arg string) (*pluginModule, error) {
	pm, err := p.fetch(cmd.Context(), arg)
	if err != nil {
		return nil, err
	}
	m, err := plugin.New(plugin.Config{CacheDir: p.g.cacheDir}, fstest.MapFS{moduleFile: {Data: pm.Wasm}},
		prometheus.NewRegistry(), p.g.logger(cmd.ErrOrStderr()))
	if err != nil {
		return nil, err
	}
	p.g.closers = append(p.g.closers, func() { _ = m.Close(context.Background()) })
	label := arg
	if pm.Artifact != nil {
		label, _, _ = strings.Cut(pm.Artifact.Reference, "@")
	}
	if pm.Module, err = m.Resolve(cmd.Context(), plugin.Reference{Builtin: strings.TrimSuffix(moduleFile, ".wasm"), Label: label}); err != nil {
		return nil, pluginError(err)
	}
	return pm, nil
}

// moduleFile is the name a module named on the command line is served under to the plugin manager.
const moduleFile = "module.wasm"

var wasmMagic = []byte("\x00asm")

func readModuleFile(path string) ([]byte, error) {
	wasm, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("plugin module %s does not exist", path)
	case err != nil:
		return nil, fmt.Errorf("reading plugin module: %w", err)
	case !bytes.HasPrefix(wasm, wasmMagic):
		return nil, fmt.Errorf("%s is not a WebAssembly module (it does not start with \\0asm); build plugins with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared", path)
	}
	return wasm, nil
}

// pluginError formats a sandbox failure as one line naming the plugin, its digest, the export and the reason,
// with the guest's output (where a Go panic's stack goes) as detail.
func pluginError(err error) error {
	var re *runtime.Error
	if !errors.As(err, &re) {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "plugin %q", re.Plugin)
	if re.Digest != "" {
		fmt.Fprintf(&b, " (%s)", runtime.ShortDigest(re.Digest))
	}
	if re.Export != "" {
		b.WriteString(" " + re.Export)
	}
	fmt.Fprintf(&b, " failed: %s", re.Reason)
	if re.Detail != "" {
		b.WriteString(": " + oneLine(re.Detail))
	}
	out := &detailedError{err: errors.New(b.String())}
	if re.Stderr != "" && re.Reason != runtime.ReasonPluginError {
		out.detail = "plugin stderr:\n" + re.Stderr
	}
	return out
}
