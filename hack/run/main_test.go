package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/scheme"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins/pluginstest"
)

// envMain makes the test binary run main instead of the tests, so the test runs `make run`'s program as a
// process of its own: its flags, its output, its signal handling.
const envMain = "OSM_HACK_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRunAsPrinted starts `make run`'s program, follows the instructions it prints (the shell lines that set
// KUBECONFIG and PATH and apply the example, as printed), applies a MachineDeployment without a profile
// annotation that only the defaulting webhook on 127.0.0.1 can name one for, waits for both MachineDeployments'
// user-data, and stops the program with SIGTERM: it exits 0, takes the API server with it and removes the
// kubeconfig.
func TestRunAsPrinted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and the controller")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "run.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(os.Args[0], "-repo", root, "-state-dir", state, "-plugin-cache-dir", pluginstest.CacheDir(t))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), envMain+"=1")
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string)
	go func() {
		// Wait closes stdout, so it waits for the reader to finish.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		if stopped {
			return
		}
		// SIGTERM first: the control plane runs in process groups of its own and stops only when asked.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		go drain(lines)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
		}
	})
	log := func() string {
		data, _ := os.ReadFile(logPath)
		return string(data)
	}

	// The instructions, to their last line (which points to the docs).
	var printed []string
	var kubeconfig string
	deadline := time.After(5 * time.Minute)
	for len(printed) == 0 || !strings.Contains(printed[len(printed)-1], "docs/operations.md") {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the program ended before it printed how to use it: %v\nstdout:\n%s\nlog:\n%s", <-exited, strings.Join(printed, "\n"), log())
			}
			printed = append(printed, line)
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "export KUBECONFIG="); ok {
				kubeconfig = v
			}
		case <-deadline:
			t.Fatalf("no instructions within 5 minutes; stdout:\n%s\nlog:\n%s", strings.Join(printed, "\n"), log())
		}
	}
	go drain(lines)
	output := strings.Join(printed, "\n")
	if kubeconfig == "" {
		t.Fatalf("the instructions do not set KUBECONFIG:\n%s", output)
	}
	if filepath.Dir(kubeconfig) != state {
		t.Errorf("kubeconfig %s is not in -state-dir %s", kubeconfig, state)
	}
	setup := shellLines(t, printed, "export KUBECONFIG=", "export PATH=")
	apply := shellLines(t, printed, "kubectl apply -f "+exampleMD)
	shell(t, root, setup+apply)

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("the printed kubeconfig: %v", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "operating-system-manager"}, mutating); err != nil {
		t.Fatalf("deploy/webhooks' mutating configuration: %v", err)
	}
	if u := mutating.Webhooks[0].ClientConfig.URL; u == nil || !strings.HasPrefix(*u, "https://127.0.0.1:") {
		t.Errorf("the defaulting webhook is not served on 127.0.0.1: %+v", mutating.Webhooks[0].ClientConfig)
	}

	// A MachineDeployment naming no profile: the controller renders only MachineDeployments that name one, so
	// it gets user-data only if the defaulting webhook answered.
	example, err := readExample(filepath.Join(root, exampleMD))
	if err != nil {
		t.Fatal(err)
	}
	unnamed := example.DeepCopy()
	unnamed.Name = "unnamed"
	delete(unnamed.Annotations, clusterv1alpha1.AnnotationOSP)
	data, err := yaml.Marshal(unnamed)
	if err != nil {
		t.Fatal(err)
	}
	unnamedFile := filepath.Join(t.TempDir(), "unnamed.yaml")
	if err := os.WriteFile(unnamedFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	shell(t, root, setup+"kubectl apply -f "+unnamedFile+"\n")
	got := &clusterv1alpha1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(unnamed), got); err != nil {
		t.Fatal(err)
	}
	if p := got.Annotations[clusterv1alpha1.AnnotationOSP]; p != "osp-ubuntu" {
		t.Errorf("the defaulting webhook named profile %q, want osp-ubuntu", p)
	}

	for _, md := range []*clusterv1alpha1.MachineDeployment{example, unnamed} {
		waitForUserData(t, c, md, log)
	}
	// The printed line that shows the bootstrap user-data.
	show := shell(t, root, setup+shellLines(t, printed, "get secret "+render.BootstrapSecretName(example)))
	if !strings.HasPrefix(show, "#cloud-config") {
		t.Errorf("the printed line showing the bootstrap user-data printed:\n%.300s", show)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("after SIGTERM: %v\nlog:\n%s", err, log())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("still running 2 minutes after SIGTERM; log:\n%s", log())
	}
	if _, err := os.Stat(kubeconfig); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the kubeconfig outlived the program: %v", err)
	}
	if err := apiServerAnswers(cfg); err == nil {
		t.Errorf("the API server still answers after the program exited")
	}
	if !strings.Contains(output, "admission webhooks https://127.0.0.1:") {
		t.Errorf("the instructions do not say where the webhooks are served:\n%s", output)
	}
}

// shellLines returns, as a script, the first printed line containing each of needles, in order.
func shellLines(t *testing.T, printed []string, needles ...string) string {
	t.Helper()
	var b strings.Builder
	for _, needle := range needles {
		i := slices.IndexFunc(printed, func(line string) bool { return strings.Contains(line, needle) })
		if i < 0 {
			t.Fatalf("the instructions lack a line with %q:\n%s", needle, strings.Join(printed, "\n"))
		}
		b.WriteString(strings.TrimSpace(printed[i]) + "\n")
	}
	return b.String()
}

// drain reads the rest of the program's output, so it never blocks writing it.
func drain(lines <-chan string) {
	for range lines {
	}
}

// shell runs script with bash in dir, as a user pasting it would, and returns its standard output.
func shell(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	// The user's shell: no KUBECONFIG of the test's environment, PATH without the control plane's binaries.
	cmd.Env = []string{"HOME=" + os.Getenv("HOME"), "PATH=/usr/local/bin:/usr/bin:/bin"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	return string(out)
}

// waitForUserData waits for md's bootstrap and provisioning Secrets with cloud-config user-data, and shows
// the log when they do not come.
func waitForUserData(t *testing.T, c client.Client, md *clusterv1alpha1.MachineDeployment, log func() string) {
	t.Helper()
	came := false
	defer func() {
		if !came { // testenv.Eventually failed the test
			t.Logf("log:\n%s", log())
		}
	}()
	testenv.Eventually(t, 3*time.Minute, "user-data of MachineDeployment "+md.Name, func() error {
		for _, name := range []string{render.BootstrapSecretName(md), render.ProvisioningSecretName(md)} {
			key := client.ObjectKey{Namespace: render.DefaultCloudInitSettingsNamespace, Name: name}
			s := &corev1.Secret{}
			if err := c.Get(context.Background(), key, s); err != nil {
				return err
			}
			if !strings.HasPrefix(string(s.Data["cloud-config"]), "#cloud-config") {
				return fmt.Errorf("no cloud-config user-data in %s", key)
			}
		}
		return nil
	})
	came = true
}

// apiServerAnswers asks the API server whether it is alive.
func apiServerAnswers(cfg *rest.Config) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	hc.Timeout = 5 * time.Second
	resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + "/livez")
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}
