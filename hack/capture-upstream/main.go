// Command capture-upstream records what upstream OSM v1.11.2 really writes into a cluster, for the migration
// tests (host/app/testdata/upstream-v1.11.2/capture). It starts the kube-apiserver and etcd the integration
// tests use (envtest, binaries from hack/control-plane.sh), installs upstream's CRDs and machine-controller's,
// upstream's RBAC and its cloud-init-settings manifest (the getter ServiceAccount, token Secret, Role and
// RoleBinding, the token filled in as kube-controller-manager's token controller would),
// kube-public/cluster-info, and MachineDeployments in two namespaces, three clouds and four operating systems.
// Then it runs upstream's own controller binary (built outside the repository by
// ../shared/bench/build-upstream.sh; never committed) as upstream's ServiceAccount until every
// MachineDeployment has its user-data, stops it, and writes every object upstream wrote or installed, with the
// fields the API server sets stripped so the objects apply again. Upstream's webhook and cert-manager manifests
// are copied as data, since nothing in a bare control plane applies them (no cert-manager, no pods).
//
//	KUBEBUILDER_ASSETS="$(hack/control-plane.sh)" go run ./hack/capture-upstream \
//	  -upstream /tmp/upstream-osm/osm-controller -crds /tmp/upstream-osm/crds \
//	  -deploy /tmp/upstream-osm/v1.11.2/deploy -out host/app/testdata/upstream-v1.11.2/capture
//
// Every token in the output belongs to the throwaway control plane of the run and is worthless elsewhere.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/osmhq/osm/host/testenv"
)

// machineDeployment is one MachineDeployment of the captured cluster.
type machineDeployment struct {
	namespace, name, os, cloud, profile string
}

// machineDeployments are spread as on an operator's cluster: two namespaces, three clouds, four operating
// systems (Flatcar with its default provisioning utility, Ignition).
var machineDeployments = []machineDeployment{
	{"kube-system", "ubuntu-aws", "ubuntu", "aws", "osp-ubuntu"},
	{"kube-system", "flatcar-aws", "flatcar", "aws", "osp-flatcar"},
	{"kube-system", "rhel-azure", "rhel", "azure", "osp-rhel"},
	{"team-a", "ubuntu-openstack", "ubuntu", "openstack", "osp-ubuntu"},
	{"team-a", "rocky-openstack", "rockylinux", "openstack", "osp-rockylinux"},
	{"team-a", "flatcar-azure", "flatcar", "azure", "osp-flatcar"},
}

// upstreamArgs are upstream's controller flags as its deploy/operating-system-manager.yaml sets them (cluster
// DNS 10.10.10.10), plus a registry mirror an operator would add, with leader election off and local ports.
func upstreamArgs(kubeconfig string) []string {
	return []string{"-kubeconfig=" + kubeconfig, "-namespace=kube-system", "-worker-count=5", "-cluster-dns=10.10.10.10",
		"-node-registry-mirrors=https://mirror.example.com", "-leader-elect=false", "-log-format=json",
		"-metrics-address=127.0.0.1:" + freePort(), "-health-probe-address=127.0.0.1:" + freePort()}
}

func main() {
	upstream := flag.String("upstream", "/tmp/upstream-osm/osm-controller", "upstream's osm-controller binary")
	crdDir := flag.String("crds", "/tmp/upstream-osm/crds", "upstream's CRDs and machine-controller's")
	deployDir := flag.String("deploy", "/tmp/upstream-osm/v1.11.2/deploy", "upstream's deploy/ directory at v1.11.2")
	out := flag.String("out", "host/app/testdata/upstream-v1.11.2/capture", "where to write the capture")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long upstream may take")
	flag.Parse()
	if err := run(*upstream, *crdDir, *deployDir, *out, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "capture-upstream:", err)
		os.Exit(1)
	}
}

func run(upstream, crdDir, deployDir, out string, timeout time.Duration) error {
	assets, err := testenv.AssetsDir()
	if err != nil {
		return err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDDirectoryPaths: []string{crdDir}, ErrorIfCRDPathMissing: true}
	env.ControlPlane.GetAPIServer().Configure().Set("enable-bootstrap-token-auth", "true")
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	ctx := context.Background()

	// What the installer puts in before upstream runs.
	for _, ns := range []string{"team-a"} {
		if err := create(ctx, c, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}); err != nil {
			return err
		}
	}
	for _, f := range []string{"cloud-init-settings.yaml", "rbac-controller.yaml"} {
		objs, err := readDocs(filepath.Join(deployDir, f))
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := create(ctx, c, o); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	if err := fillGetterToken(ctx, cfg.CAData, kubernetes.NewForConfigOrDie(cfg)); err != nil {
		return err
	}
	if err := create(ctx, c, clusterInfo(cfg.Host, cfg.CAData)); err != nil {
		return err
	}
	for _, md := range machineDeployments {
		if err := create(ctx, c, md.object()); err != nil {
			return err
		}
	}

	// Upstream, as its own ServiceAccount.
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "capture-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "capture-upstream")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	kubeconfig, err := impersonating(kc, "system:serviceaccount:kube-system:operating-system-manager", dir)
	if err != nil {
		return err
	}
	var logs bytes.Buffer
	cmd := exec.Command(upstream, upstreamArgs(kubeconfig)...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return err
	}
	started := time.Now()
	waitErr := waitForUserData(ctx, c, timeout)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if waitErr != nil {
		return fmt.Errorf("%w\nupstream's log:\n%s", waitErr, logs.String())
	}
	fmt.Fprintf(os.Stderr, "upstream wrote every MachineDeployment's user-data in %s\n", time.Since(started).Round(time.Millisecond))
	return dump(ctx, c, deployDir, out)
}

func (m machineDeployment) object() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.k8s.io/v1alpha1", "kind": "MachineDeployment",
		"metadata": map[string]any{"namespace": m.namespace, "name": m.name, "annotations": map[string]any{
			// machine-controller sets the revision; the profile annotation is the operator's (or its webhook's).
			"machinedeployment.clusters.k8s.io/revision": "1", "k8c.io/operating-system-profile": m.profile}},
		"spec": map[string]any{
			"replicas": int64(1),
			"selector": map[string]any{"matchLabels": map[string]any{"name": m.name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"name": m.name}},
				"spec": map[string]any{
					"providerSpec": map[string]any{"value": map[string]any{
						"cloudProvider": m.cloud, "cloudProviderSpec": map[string]any{"region": "capture"},
						"operatingSystem": m.os, "operatingSystemSpec": map[string]any{},
						"sshPublicKeys": []any{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOsmTestKey capture@osm"},
					}},
					"versions": map[string]any{"kubelet": "1.33.2"},
				},
			},
		},
	}}
}

// fillGetterToken does what kube-controller-manager's token controller does for the getter's
// service-account-token Secret, which a bare control plane lacks: a token for cloud-init-getter, the CA and
// the namespace. The token is a real one of this throwaway cluster.
func fillGetterToken(ctx context.Context, ca []byte, cs *kubernetes.Clientset) error {
	tr, err := cs.CoreV1().ServiceAccounts("cloud-init-settings").CreateToken(ctx, "cloud-init-getter",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a token for cloud-init-getter: %w", err)
	}
	s, err := cs.CoreV1().Secrets("cloud-init-settings").Get(ctx, "cloud-init-getter-token", metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.Data = map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte("cloud-init-settings")}
	_, err = cs.CoreV1().Secrets("cloud-init-settings").Update(ctx, s, metav1.UpdateOptions{})
	return err
}

func clusterInfo(host string, ca []byte) *unstructured.Unstructured {
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n",
		host, base64.StdEncoding.EncodeToString(ca))
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": "kube-public", "name": "cluster-info"}, "data": map[string]any{"kubeconfig": kubeconfig}}}
}

// impersonating writes kc as a kubeconfig that acts as user.
func impersonating(kc []byte, user, dir string) (string, error) {
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		return "", err
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// waitForUserData waits until every MachineDeployment has both user-data Secrets and upstream's OSC.
func waitForUserData(ctx context.Context, c client.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		missing := ""
		for _, md := range machineDeployments {
			for _, s := range []string{"bootstrap", "provisioning"} {
				name := fmt.Sprintf("%s-%s-%s-config", md.name, md.namespace, s)
				if err := c.Get(ctx, client.ObjectKey{Namespace: "cloud-init-settings", Name: name}, &corev1.Secret{}); err != nil {
					missing = name
				}
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("upstream did not write Secret %s in %s", missing, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// capture is one output file: what it holds, listed from the cluster.
type capture struct {
	file      string
	gvk       schema.GroupVersionKind
	namespace string
	keep      func(*unstructured.Unstructured) bool
}

func all(*unstructured.Unstructured) bool { return true }

func named(prefix string) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool { return strings.HasPrefix(u.GetName(), prefix) }
}

func dump(ctx context.Context, c client.Client, deployDir, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	core := func(kind string) schema.GroupVersionKind { return schema.GroupVersionKind{Version: "v1", Kind: kind} }
	rbac := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: kind}
	}
	osm := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "operatingsystemmanager.k8c.io", Version: "v1alpha1", Kind: kind}
	}
	getter := named("cloud-init-getter")
	captures := []capture{
		{"10-namespaces.yaml", core("Namespace"), "", func(u *unstructured.Unstructured) bool {
			return u.GetName() == "cloud-init-settings" || u.GetName() == "team-a"
		}},
		{"20-getter.yaml", core("ServiceAccount"), "cloud-init-settings", getter},
		{"20-getter.yaml", core("Secret"), "cloud-init-settings", getter},
		{"20-getter.yaml", rbac("Role"), "cloud-init-settings", getter},
		{"20-getter.yaml", rbac("RoleBinding"), "cloud-init-settings", getter},
		{"30-profiles.yaml", osm("OperatingSystemProfile"), "kube-system", all},
		{"40-machinedeployments.yaml", schema.GroupVersionKind{Group: "cluster.k8s.io", Version: "v1alpha1", Kind: "MachineDeployment"}, "", all},
		{"50-operatingsystemconfigs.yaml", osm("OperatingSystemConfig"), "kube-system", all},
		{"60-user-data-secrets.yaml", core("Secret"), "cloud-init-settings", func(u *unstructured.Unstructured) bool { return !getter(u) }},
		{"70-bootstrap-tokens.yaml", core("Secret"), "kube-system", named("bootstrap-token-")},
	}
	files := map[string][]*unstructured.Unstructured{}
	for _, cp := range captures {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(cp.gvk.GroupVersion().WithKind(cp.gvk.Kind + "List"))
		if err := c.List(ctx, l, client.InNamespace(cp.namespace)); err != nil {
			return fmt.Errorf("listing %s: %w", cp.gvk.Kind, err)
		}
		sort.Slice(l.Items, func(i, j int) bool {
			return l.Items[i].GetNamespace()+"/"+l.Items[i].GetName() < l.Items[j].GetNamespace()+"/"+l.Items[j].GetName()
		})
		for i := range l.Items {
			if u := &l.Items[i]; cp.keep(u) {
				u.SetGroupVersionKind(cp.gvk)
				files[cp.file] = append(files[cp.file], strip(u))
			}
		}
	}
	for file, objs := range files {
		if err := write(filepath.Join(out, file), objs); err != nil {
			return err
		}
	}
	// Installed by upstream's manifests, not by its controller, and inert without pods and cert-manager: copied
	// as data.
	for _, f := range []struct{ to, from string }{
		{"80-webhook.yaml", "operating-system-manager-webhook.yaml"},
		{"80-webhook-rbac.yaml", "rbac-webhook.yaml"},
		{"80-cert-manager.yaml", "certificate.yaml"},
		{"80-controller.yaml", "operating-system-manager.yaml"},
	} {
		data, err := os.ReadFile(filepath.Join(deployDir, f.from))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, f.to), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// strip removes what the API server sets, so the object applies to another cluster.
func strip(u *unstructured.Unstructured) *unstructured.Unstructured {
	for _, f := range []string{"uid", "resourceVersion", "managedFields", "creationTimestamp", "generation", "selfLink"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	if u.GetKind() == "MachineDeployment" || u.GetKind() == "Namespace" {
		unstructured.RemoveNestedField(u.Object, "status")
	}
	if u.GetKind() == "Namespace" {
		unstructured.RemoveNestedField(u.Object, "spec")
		labels := u.GetLabels()
		delete(labels, "kubernetes.io/metadata.name")
		u.SetLabels(labels)
	}
	return u
}

func write(path string, objs []*unstructured.Unstructured) error {
	var buf bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		buf.Write(data)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func readDocs(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

func create(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(errors.New("no free port"))
	}
	defer func() { _ = l.Close() }()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}
