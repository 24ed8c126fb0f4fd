package verifyproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/signature/policy"
)

const (
	// Executable is the verifier's name beside the controller's executable (the image ships both in
	// /usr/local/bin).
	Executable = "osm-plugin-verify"
	// EnvServe, set in a process's environment, makes a binary that links package signature serve one
	// request on its standard input instead of running its main (test binaries, osmctl).
	EnvServe = "OSM_PLUGIN_VERIFY_SERVE"
	// EnvPath is the environment variable the controller's -plugin-verifier defaults to.
	EnvPath = "OSM_PLUGIN_VERIFIER"
)

// Defaults of a Runner.
const (
	// DefaultTimeout bounds one verification: gathering the signatures from the registry and the verifier
	// process.
	DefaultTimeout = 30 * time.Second
	// DefaultProcessTimeout bounds the verifier process alone (its start and the cryptography; verifying a
	// bundle takes milliseconds).
	DefaultProcessTimeout = 10 * time.Second
	// DefaultAddressSpace is the verifier's RLIMIT_AS: a Go process reserves a few hundred MiB of address
	// space at start, and the request is at most MaxRequest.
	DefaultAddressSpace = 2 << 30
	// DefaultNice is the verifier's nice value: it checks tenants' images, below the controller's priority.
	DefaultNice = 10
)

// SelfServes is set by package signature when it is linked: this process's own executable can serve as the
// verifier (tests, osmctl). The controller does not link it, so it needs the verifier executable.
var SelfServes bool

// Runner starts verifier processes.
type Runner struct {
	// Path of the verifier executable; default: Executable beside this process's executable, or this
	// executable itself when it links the verifier (SelfServes).
	Path string
	// Timeout bounds one verification, ProcessTimeout its verifier process, AddressSpace the process's
	// RLIMIT_AS; zero: the defaults.
	Timeout, ProcessTimeout time.Duration
	AddressSpace            uint64
	Log                     logr.Logger
}

// For returns the verifier of images under trust: it implements plugin.Verifier.
func (r *Runner) For(trust *policy.Trust) *Verifier { return &Verifier{trust: trust, run: r} }

// Verifier checks pulled images under one rule of a policy, in a verifier process.
type Verifier struct {
	trust *policy.Trust
	run   *Runner
}

// Key identifies the policy, the rule and the trust material.
func (v *Verifier) Key() string { return v.trust.Key }

// Mode is the rule's mode.
func (v *Verifier) Mode() policy.Mode { return v.trust.Rule.Mode }

// Verify gathers art's signatures through client and has a verifier process check them. A refusal is an
// *policy.Error, logged and passed in mode warn; a verifier that cannot answer refuses in every mode.
func (v *Verifier) Verify(ctx context.Context, client *oci.Client, art *oci.Artifact) error {
	timeout := v.run.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := v.trust
	refuse := func(reason, detail string) *policy.Error {
		return &policy.Error{Reason: reason, Image: art.Reference, Policy: t.Policy, Rule: t.Rule.Name, Detail: detail}
	}
	var resp *Response
	ev, err := Gather(ctx, client, art)
	if rerr, ok := errors.AsType[*RegistryError](err); ok {
		return refuse(osmv1alpha1.ReasonPluginPullFailed, rerr.Detail) // the registry failed, not the signature
	}
	if err == nil {
		resp, err = v.run.Run(ctx, &Request{Version: Version, Trust: *t, Evidence: *ev})
	}
	if err == nil {
		err = check(resp)
	}
	switch {
	case err != nil:
		return fmt.Errorf("plugin %s: verifying its signatures under the plugin verification policy %s (%s): %w", art.Reference, t.Policy, t.Rule.Name, err)
	case resp.Refusal != nil && t.Rule.Mode == policy.ModeWarn:
		v.run.Log.Info("plugin signature not verified; loading it anyway (mode warn)", "image", art.Reference, "policy", t.Policy,
			"rule", t.Rule.Name, "reason", resp.Refusal.Reason, "detail", resp.Refusal.Detail)
		return nil
	case resp.Refusal != nil:
		return refuse(resp.Refusal.Reason, resp.Refusal.Detail)
	}
	v.run.Log.V(1).Info("plugin signature verified", "image", art.Reference, "policy", t.Policy, "rule", t.Rule.Name, "authority", resp.Authority)
	return nil
}

// check returns an error unless resp is a refusal or an acceptance: a verifier that could not use the trust
// material, or answered neither, accepted nothing.
func check(resp *Response) error {
	switch {
	case resp.Error != "":
		return errors.New(resp.Error)
	case resp.Refusal != nil:
		return nil
	case resp.Authority == "":
		return errors.New("the plugin verifier answered neither an authority nor a refusal")
	}
	return nil
}

// Run has a verifier process answer req, within the process bounds.
func (r *Runner) Run(ctx context.Context, req *Request) (*Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if len(body) > MaxRequest {
		return nil, fmt.Errorf("the signatures and trust material are %d bytes, more than the %d a verification takes", len(body), MaxRequest)
	}
	path, err := r.path()
	if err != nil {
		return nil, err
	}
	timeout := r.ProcessTimeout
	if timeout <= 0 {
		timeout = DefaultProcessTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Args = []string{Executable}
	cmd.Env = processEnv()
	// The verifier dies with the controller; its pipes are closed a second after it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	stdout, stderr := &capped{max: MaxResponse}, &capped{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the plugin verifier %s: %w", path, err)
	}
	// Bounded before it reads anything: the request is what could make it allocate.
	if err := r.confine(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	_, werr := stdin.Write(body)
	_ = stdin.Close()
	err = cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("the plugin verifier did not answer within %s", timeout)
	case err != nil:
		return nil, fmt.Errorf("the plugin verifier failed: %w: %s", err, Truncate(stderr.String()))
	case werr != nil:
		return nil, fmt.Errorf("writing to the plugin verifier: %w", werr)
	case stdout.over:
		return nil, fmt.Errorf("the plugin verifier answered more than %d bytes", MaxResponse)
	}
	var resp Response
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		return nil, fmt.Errorf("the plugin verifier's answer: %w", err)
	}
	if resp.Version != Version {
		return nil, fmt.Errorf("the plugin verifier answered version %d, not %d (is %s from another build?)", resp.Version, Version, path)
	}
	return &resp, nil
}

// confine sets the verifier's RLIMIT_AS and lowers its priority (the latter best effort).
func (r *Runner) confine(pid int) error {
	as := r.AddressSpace
	switch {
	case as != 0:
	case raceAddressSpace != 0:
		as = raceAddressSpace
	default:
		as = DefaultAddressSpace
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: as, Max: as}, nil); err != nil {
		return fmt.Errorf("bounding the plugin verifier's memory: %w", err)
	}
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, pid, DefaultNice); err != nil {
		r.Log.V(1).Info("could not lower the plugin verifier's priority", "pid", pid, "error", err.Error())
	}
	return nil
}

// processEnv is the verifier's whole environment: it inherits none of the controller's (no API server
// address, no proxy settings, nothing a credential could hide in).
func processEnv() []string {
	env := []string{EnvServe + "=1"}
	for _, k := range []string{"GOMAXPROCS", "GOGC", "GODEBUG", "GORACE", "GOTRACEBACK"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// path finds the verifier executable.
func (r *Runner) path() (string, error) {
	if r.Path != "" {
		return r.Path, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the plugin verifier: %w", err)
	}
	sibling := filepath.Join(filepath.Dir(exe), Executable)
	if fi, err := os.Stat(sibling); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return sibling, nil
	}
	if SelfServes {
		return exe, nil
	}
	return "", fmt.Errorf("no plugin verifier: %s is not beside %s (-plugin-verifier or %s names it elsewhere)", Executable, exe, EnvPath)
}

// capped keeps the first max bytes written to it and notes that more came. (Not an embedded bytes.Buffer:
// io.Copy would use its ReadFrom and bypass the bound.)
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		c.over = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) Bytes() []byte  { return c.buf.Bytes() }
func (c *capped) String() string { return c.buf.String() }
