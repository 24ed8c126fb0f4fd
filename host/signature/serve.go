package signature

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	"github.com/landlock-lsm/go-landlock/landlock"

	"github.com/osmhq/osm/host/signature/verifyproc"
)

// init makes every binary that links this package able to serve as the plugin verifier (verifyproc.Runner
// starts its own executable with verifyproc.EnvServe set when no osm-plugin-verify is beside it): test
// binaries and osmctl need no second binary. The controller does not link this package.
func init() {
	verifyproc.SelfServes = true
	if _, ok := os.LookupEnv(verifyproc.EnvServe); !ok {
		return
	}
	_ = os.Unsetenv(verifyproc.EnvServe)
	os.Exit(ServeMain())
}

// ServeMain is the verifier process: it gives up the file system and the network, answers the request on
// its standard input on its standard output, and returns the exit code.
func ServeMain() int {
	if err := Confine(); err != nil {
		fmt.Fprintln(os.Stderr, "plugin verifier:", err)
		return 2
	}
	if err := Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "plugin verifier:", err)
		return 1
	}
	return 0
}

// Confine makes the kernel refuse this process every file system access and every TCP bind or connect from
// here on, with Landlock (irrevocably): the verifier reads its request from its standard input and needs
// nothing else, so a flaw in the code parsing signatures cannot read the controller's service account token
// or reach the network. Where the kernel has no Landlock (before Linux 5.13, or disabled; TCP rules need
// Linux 6.7), BestEffort restricts what the kernel offers and the verifier holds nothing but its request
// and its (empty) environment.
func Confine() error {
	if err := landlock.V7.BestEffort().Restrict(); err != nil {
		return fmt.Errorf("restricting the plugin verifier with Landlock: %w", err)
	}
	return nil
}

// Serve answers one verifyproc.Request read from r (at most verifyproc.MaxRequest bytes) on w.
func Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	raw, err := io.ReadAll(io.LimitReader(r, verifyproc.MaxRequest+1))
	if err != nil {
		return err
	}
	if len(raw) > verifyproc.MaxRequest {
		return fmt.Errorf("the request exceeds %d bytes", verifyproc.MaxRequest)
	}
	var req verifyproc.Request
	if err := json.Unmarshal(raw, &req); err != nil {
		return fmt.Errorf("the request: %w", err)
	}
	if req.Version != verifyproc.Version {
		return fmt.Errorf("the request is version %d; this verifier answers version %d", req.Version, verifyproc.Version)
	}
	return json.NewEncoder(w).Encode(answer(ctx, &req))
}

// answer checks the request's evidence under its trust.
func answer(ctx context.Context, req *verifyproc.Request) verifyproc.Response {
	resp := verifyproc.Response{Version: verifyproc.Version}
	v, err := FromTrust(&req.Trust, logr.Discard())
	if err != nil {
		resp.Error = verifyproc.Truncate(err.Error())
		return resp
	}
	by, rerr := v.check(ctx, &req.Evidence)
	if rerr != nil {
		resp.Refusal = &verifyproc.Refusal{Reason: rerr.Reason, Detail: verifyproc.Truncate(rerr.Detail)}
		return resp
	}
	resp.Authority = by
	return resp
}
