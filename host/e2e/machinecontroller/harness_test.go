//go:build machinecontroller

// Package machinecontroller proves OSM's rollouts (docs/drift.md) against the real machine-controller: its binary
// runs against a real kube-apiserver with the fake cloud provider, next to OSM's controller run in the test
// process, and the test reads the user-data machine-controller handed the provider for each Machine.
//
// Run it with `make e2e-machine-controller MACHINE_CONTROLLER=... MACHINE_CONTROLLER_CRDS=...`. The build tag
// keeps it out of a plain `go test ./...`.
//
// Environment:
//
//	OSM_MACHINE_CONTROLLER       path of a machine-controller binary built from its public source, whose fake
//	                             provider logs the user-data it is handed (see docs/drift.md, "Proof")
//	OSM_MACHINE_CONTROLLER_CRDS  a YAML file holding machine-controller's Machine, MachineSet and
//	                             MachineDeployment CRDs (examples/machine-controller.yaml of the same source)
//	OSM_MACHINE_CONTROLLER_ARTIFACTS  directory for the two controllers' logs (default: a new temporary
//	                             directory, removed when the test passes)
package machinecontroller

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/osmhq/osm/host/testenv"
)

// createdLine is the message of the log line the fake provider writes when machine-controller creates an
// instance, with fields instance (the machine's name), machineUID and userdata.
const createdLine = "fake provider created an instance"

// providerIDPrefix is the provider ID the fake provider gives its instances: fake:///<machine name>.
const providerIDPrefix = "fake:///"

// deletedLine is the message of the log line the fake provider writes when machine-controller deletes an
// instance, with field machineUID.
const deletedLine = "fake provider deleted an instance"

// instance is what the fake provider was handed for one Machine.
type instance struct {
	Machine, UID, UserData string
	At                     time.Time
}

// machineController is a running machine-controller process.
type machineController struct {
	mu        sync.Mutex
	instances map[string]instance // by machine name
	created   chan instance
	deleted   int
}

// installMachineControllerCRDs installs the CRDs found in path (a multi-document YAML file) and returns
// their names.
func installMachineControllerCRDs(t *testing.T, env *testenv.Env, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("OSM_MACHINE_CONTROLLER_CRDS: %v", err)
	}
	var defs []*apiextensionsv1.CustomResourceDefinition
	var names []string
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		var head metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &head); err != nil || head.Kind != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, crd); err != nil {
			t.Fatalf("decoding a CRD of %s: %v", path, err)
		}
		if crd.Spec.Group == "cluster.k8s.io" {
			defs = append(defs, crd)
			names = append(names, crd.Name)
		}
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: defs}); err != nil {
		t.Fatalf("installing machine-controller's CRDs from %s: %v", path, err)
	}
	return names
}

// startMachineController runs the binary against env's API server until the test ends, its log in logPath.
func startMachineController(t *testing.T, env *testenv.Env, bin, logPath string) *machineController {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	mc := &machineController{instances: map[string]instance{}, created: make(chan instance, 1024)}
	// Every address on loopback; no leader election (one replica), no CSR approver (no kubelets ask).
	cmd := exec.Command(bin,
		"-kubeconfig", env.Kubeconfig,
		"-enable-leader-election=false",
		"-node-csr-approver=false",
		"-metrics-address", "127.0.0.1:0",
		"-health-probe-address", "127.0.0.1:0",
		"-worker-count", "10",
		"-log-format", "JSON",
	)
	out, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting machine-controller %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); _ = w.Close() }()
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logFile.Write(append(line, '\n'))
			mc.parse(line)
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		<-read
		_ = logFile.Close()
	})
	// Fail early when the binary does not start (a wrong path, a flag it does not know).
	select {
	case err := <-exited:
		t.Fatalf("machine-controller exited at once: %v (log: %s)", err, logPath)
	case <-time.After(2 * time.Second):
	}
	return mc
}

func (mc *machineController) parse(line []byte) {
	var entry struct {
		Msg      string `json:"msg"`
		Instance string `json:"instance"`
		UID      string `json:"machineUID"`
		UserData string `json:"userdata"`
	}
	if !bytes.Contains(line, []byte("fake provider")) || json.Unmarshal(line, &entry) != nil {
		return
	}
	if entry.Msg == deletedLine {
		mc.mu.Lock()
		mc.deleted++
		mc.mu.Unlock()
	}
	if entry.Msg != createdLine {
		return
	}
	i := instance{Machine: entry.Instance, UID: entry.UID, UserData: entry.UserData, At: time.Now()}
	mc.mu.Lock()
	mc.instances[i.Machine] = i
	mc.mu.Unlock()
	mc.created <- i
}

// instance returns what the provider was handed for the machine, if it was.
func (mc *machineController) instance(machine string) (instance, bool) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	i, ok := mc.instances[machine]
	return i, ok
}

// count is how many instances the provider created and deleted.
func (mc *machineController) count() (created, deleted int) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return len(mc.instances), mc.deleted
}

// joinNodes stands in for the kubelets of the instances the provider creates: each registers a Ready Node
// named after its machine, with the instance's provider ID, as a VM booted from the user-data would. It
// stops when ctx ends.
func (mc *machineController) joinNodes(ctx context.Context, t *testing.T, c client.Client) {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case i := <-mc.created:
				if err := registerNode(ctx, c, i.Machine); err != nil && ctx.Err() == nil {
					t.Errorf("registering the node of %s: %v", i.Machine, err)
				}
			}
		}
	}()
}

func registerNode(ctx context.Context, c client.Client, name string) error {
	// Labels and annotations as a kubelet registers them (machine-controller adds its own to both maps).
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"},
			Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: corev1.NodeSpec{ProviderID: providerIDPrefix + name},
	}
	if err := c.Create(ctx, node); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	now := metav1.Now()
	for range 50 {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		node.Status = corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v" + kubeletVersion},
		}
		err := c.Status().Update(ctx, node)
		if err == nil {
			return nil
		}
		if !isConflict(err) {
			return err
		}
		time.Sleep(100 * time.Millisecond) // retry interval after a conflict
	}
	return fmt.Errorf("node %s: status update kept conflicting", name)
}

// artifacts returns the directory for the controllers' logs; it is removed when the test passes unless
// OSM_MACHINE_CONTROLLER_ARTIFACTS named it.
func artifacts(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("OSM_MACHINE_CONTROLLER_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir, err := os.MkdirTemp("", "osm-machine-controller-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return filepath.Clean(dir)
}
