//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/osmhq/osm/crds"
	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/plugins/pluginstest"
)

const (
	osmNamespace = "kube-system"
	userDataNS   = render.DefaultCloudInitSettingsNamespace
)

// cluster is a real kube-apiserver and etcd (envtest, binaries from hack/control-plane.sh) set up the way a
// kubeadm cluster is for nodes that join with bootstrap tokens, with an audit log and a client CA whose key
// the harness holds, so that it can sign the kubelet's certificate the way kube-controller-manager would.
//
// testenv.Start is not used because the kubelet's CSR must be signed by a CA the API server trusts for client
// certificates, and testenv does not expose the CA envtest generates; the cluster here plugs its own CA into
// envtest (envtest.Authn) and otherwise starts the same control plane with the same CRDs.
type cluster struct {
	env      *envtest.Environment
	cfg      *rest.Config
	c        client.Client
	cs       kubernetes.Interface
	ca       *clusterCA
	dir      string
	auditLog string
	mirror   *mirror
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	dir := filepath.Join(harness.Artifacts, "cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	defs, err := crds.OSMDefinitions()
	if err != nil {
		t.Fatal(err)
	}
	ext, err := crds.ExternalDefinitions()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := newClusterCA()
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{ca: ca, dir: dir, auditLog: filepath.Join(dir, "audit.log")}
	policy := filepath.Join(dir, "audit-policy.yaml")
	// Metadata only (never Secret contents): who read which user-data Secret, from where, with which result;
	// who created which CSR.
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    resources: [{group: "", resources: [secrets]}]
    namespaces: [`+userDataNS+`]
  - level: Metadata
    resources: [{group: certificates.k8s.io, resources: [certificatesigningrequests]}]
  - level: Metadata
    resources: [{group: "", resources: [nodes]}]
  - level: None
`), 0o644); err != nil {
		t.Fatal(err)
	}
	c.env = &envtest.Environment{BinaryAssetsDirectory: assets, CRDs: append(defs, ext...), ErrorIfCRDPathMissing: true, Scheme: testenv.Scheme}
	c.env.ControlPlane.APIServer = &envtest.APIServer{}
	c.env.ControlPlane.APIServer.Authn = ca
	args := c.env.ControlPlane.GetAPIServer().Configure()
	for k, v := range map[string]string{
		// Nodes authenticate with bootstrap tokens until their kubelet has a certificate.
		"enable-bootstrap-token-auth": "true",
		// The Node authorizer lets a kubelet with a system:node:<name> certificate register its Node.
		"authorization-mode": "Node,RBAC",
		"audit-policy-file":  policy,
		"audit-log-path":     c.auditLog,
	} {
		args.Set(k, v)
	}
	c.cfg, err = c.env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd from %s: %v", assets, err)
	}
	t.Cleanup(func() {
		if err := c.env.Stop(); err != nil {
			t.Logf("stopping the control plane: %v", err)
		}
	})
	if c.c, err = client.New(c.cfg, client.Options{Scheme: testenv.Scheme}); err != nil {
		t.Fatal(err)
	}
	if c.cs, err = kubernetes.NewForConfig(c.cfg); err != nil {
		t.Fatal(err)
	}
	c.publishClusterInfo(t)
	c.bootstrapRBAC(t)
	c.ensureNamespace(t, userDataNS)
	c.mirror = startMirror(t, harness.Mirror, filepath.Join(dir, "mirror-access.log"))
	t.Logf("API server %s, binary mirror %s, artifacts %s", c.cfg.Host, c.mirror.URL, harness.Artifacts)
	return c
}

func (c *cluster) ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.c.Create(context.Background(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

// publishClusterInfo writes kube-public/cluster-info as kubeadm does: the API server URL nodes use and the CA
// that signed its serving certificate.
func (c *cluster) publishClusterInfo(t *testing.T) {
	t.Helper()
	c.ensureNamespace(t, "kube-public")
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n",
		c.cfg.Host, base64.StdEncoding.EncodeToString(c.cfg.CAData))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "cluster-info"}, Data: map[string]string{"kubeconfig": kubeconfig}}
	if err := c.c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

// bootstrapRBAC grants what machine-controller grants the bootstrap tokens' group: creating CSRs
// (system:node-bootstrapper), as kubeadm does for its own token group.
func (c *cluster) bootstrapRBAC(t *testing.T) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "machine-controller:kubelet-bootstrap"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: credentials.NodeBootstrapGroup}},
	}
	if err := c.c.Create(context.Background(), crb); err != nil {
		t.Fatal(err)
	}
}

// startOSM runs the controller in the test process, as cmd/osm-controller would, with the embedded default
// plugins and profiles, and nodes pointed at the local binary mirror (-node-binary-base-url). Its log goes to
// <artifacts>/cluster/osm-controller.log.
func (c *cluster) startOSM(t *testing.T, mutate func(*app.Options)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logFile, err := os.OpenFile(filepath.Join(c.dir, "osm-controller.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	logger := funcr.NewJSON(func(obj string) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintln(logFile, obj)
	}, funcr.Options{Verbosity: 1, LogTimestamp: true})
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	settings := render.DefaultSettings()
	settings.Namespace = osmNamespace
	settings.BinaryBaseURL = c.mirror.URL + "/kubernetes"
	opts := app.Options{
		Mgmt: c.cfg, Settings: settings, Defaults: defaults, Builtins: pluginstest.Dist(t),
		Plugins:        plugin.Config{CacheDir: filepath.Join(os.TempDir(), "osm-e2e-plugin-cache"), Timeout: 5 * time.Second, MemoryLimit: 64 << 20},
		MetricsAddress: "0", HealthProbeAddress: "0", InProcessRestart: true, WorkerCount: 4, Logger: logger, Build: "e2e",
	}
	if mutate != nil {
		mutate(&opts)
	}
	mgr, err := app.New(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("building the controller: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller stopped with: %v", err)
		}
		logFile.Close()
	})
}

// airgappedProfile is a copy of a default profile whose plugin downloads everything from the local mirror:
// what an operator of an air-gapped site does (the Kubernetes binaries follow -node-binary-base-url already).
func (c *cluster) airgappedProfile(t *testing.T, from, name string, config map[string]string) *osmv1alpha1.OperatingSystemProfile {
	t.Helper()
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	var osp *osmv1alpha1.OperatingSystemProfile
	for _, d := range defaults {
		if d.Name == from {
			osp = d.DeepCopy()
		}
	}
	if osp == nil {
		t.Fatalf("no default profile %s", from)
	}
	osp.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: osmNamespace}
	if osp.Spec.Plugin == nil {
		t.Fatalf("default profile %s has no plugin", from)
	}
	osp.Spec.Plugin.Config = map[string]string{
		"cniBaseURL":      c.mirror.URL + "/cni",
		"criToolsBaseURL": c.mirror.URL + "/cri-tools",
	}
	for k, v := range config {
		osp.Spec.Plugin.Config[k] = v
	}
	if err := c.c.Create(context.Background(), osp); err != nil {
		t.Fatalf("creating profile %s: %v", name, err)
	}
	return osp
}

// createMD creates a MachineDeployment as machine-controller users write them, for the "edge" provider
// (machines that exist already, which is what a booted rootfs is).
func (c *cluster) createMD(t *testing.T, name, osName, osp string) *clusterv1alpha1.MachineDeployment {
	t.Helper()
	return c.createMDFor(t, name, osName, osp, "edge")
}

// createMDFor creates a MachineDeployment for a cloud provider.
func (c *cluster) createMDFor(t *testing.T, name, osName, osp, provider string) *clusterv1alpha1.MachineDeployment {
	t.Helper()
	pc, err := json.Marshal(map[string]any{
		"cloudProvider": provider, "cloudProviderSpec": map[string]any{},
		"operatingSystem": osName, "operatingSystemSpec": map[string]any{},
		"sshPublicKeys": []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOsmE2eTestKeyOnly00000000000000000000000 e2e@osm"},
	})
	if err != nil {
		t.Fatal(err)
	}
	md := &clusterv1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: osmNamespace, Annotations: map[string]string{
			clusterv1alpha1.AnnotationRevision: "1",
			clusterv1alpha1.AnnotationOSP:      osp,
		}},
		Spec: clusterv1alpha1.MachineDeploymentSpec{Template: clusterv1alpha1.MachineTemplateSpec{Spec: clusterv1alpha1.MachineSpec{
			ProviderSpec: clusterv1alpha1.ProviderSpec{Value: &runtime.RawExtension{Raw: pc}},
			Versions:     clusterv1alpha1.MachineVersionInfo{Kubelet: strings.TrimPrefix(harness.KubeVersion, "v")},
		}}},
	}
	if err := c.c.Create(context.Background(), md); err != nil {
		t.Fatalf("creating MachineDeployment %s: %v", name, err)
	}
	return md
}

// userData waits for md's bootstrap and provisioning Secrets and returns them.
func (c *cluster) userData(t testing.TB, md *clusterv1alpha1.MachineDeployment) (bootstrap, provisioning *corev1.Secret) {
	t.Helper()
	get := func(name string) *corev1.Secret {
		var s corev1.Secret
		var err error
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			err = c.c.Get(context.Background(), client.ObjectKey{Namespace: userDataNS, Name: name}, &s)
			if err == nil && len(s.Data[render.CloudConfigKey]) > 0 {
				return &s
			}
			time.Sleep(200 * time.Millisecond) // polling interval
		}
		osc := &osmv1alpha1.OperatingSystemConfig{}
		oscErr := c.c.Get(context.Background(), client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(md)}, osc)
		t.Fatalf("Secret %s/%s: not written after 90s (%v); OSC: %v %+v; see %s", userDataNS, name, err, oscErr, osc.Status, filepath.Join(c.dir, "osm-controller.log"))
		return nil
	}
	return get(render.BootstrapSecretName(md)), get(render.ProvisioningSecretName(md))
}

// bootstrapTokenID returns the id of md's bootstrap token (kube-system/bootstrap-token-<id>).
func (c *cluster) bootstrapTokenID(t testing.TB, md *clusterv1alpha1.MachineDeployment) string {
	t.Helper()
	return string(c.bootstrapTokenSecret(t, md).Data["token-id"])
}

// bootstrapTokenSecret returns md's bootstrap token Secret.
func (c *cluster) bootstrapTokenSecret(t testing.TB, md *clusterv1alpha1.MachineDeployment) *corev1.Secret {
	t.Helper()
	list := &corev1.SecretList{}
	if err := c.c.List(context.Background(), list, client.InNamespace("kube-system"), client.MatchingLabels(credentials.Labels(md))); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].Type == "bootstrap.kubernetes.io/token" {
			return &list.Items[i]
		}
	}
	t.Fatalf("no bootstrap token for MachineDeployment %s", md.Name)
	return nil
}

// csrsBy lists the CSRs the API server recorded as created by username.
func (c *cluster) csrsBy(username string) ([]certificatesv1.CertificateSigningRequest, error) {
	list, err := c.cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, csr := range list.Items {
		if csr.Spec.Username == username {
			out = append(out, csr)
		}
	}
	return out, nil
}

// approveAndSign does what kube-controller-manager's csrapproving and csrsigning controllers do for a
// kubelet's client certificate request: approve it and issue a certificate from the cluster CA.
func (c *cluster) approveAndSign(t *testing.T, csr *certificatesv1.CertificateSigningRequest) {
	t.Helper()
	ctx := context.Background()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "OSME2EAutoApprove",
		Message: "approved by the OSM node e2e harness, as kube-controller-manager approves node client CSRs of bootstrap tokens",
	})
	approved, err := c.cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("approving CSR %s: %v", csr.Name, err)
	}
	certPEM, err := c.ca.sign(approved.Spec.Request, approved.Spec.Usages)
	if err != nil {
		t.Fatalf("signing CSR %s: %v", csr.Name, err)
	}
	approved.Status.Certificate = certPEM
	if _, err := c.cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, approved, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("issuing the certificate of CSR %s: %v", csr.Name, err)
	}
}

// auditEvent is the part of an audit.k8s.io/v1 Event the harness checks.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	SourceIPs []string `json:"sourceIPs"`
	UserAgent string   `json:"userAgent"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
}

func (e auditEvent) String() string {
	code := 0
	if e.ResponseStatus != nil {
		code = e.ResponseStatus.Code
	}
	return fmt.Sprintf("%s %s by %s %v from %v (%s): %d", e.Verb, e.RequestURI, e.User.Username, e.User.Groups, e.SourceIPs, e.UserAgent, code)
}

// audit returns the requests of the audit log that match, each once: at ResponseComplete, or at
// ResponseStarted for requests that never complete in the log (the API server records a failed
// authentication only there).
func (c *cluster) audit(t testing.TB, match func(auditEvent) bool) []auditEvent {
	t.Helper()
	f, err := os.Open(c.auditLog)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	defer f.Close()
	var order []string
	byID := map[string]auditEvent{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		var e auditEvent
		if json.Unmarshal(s.Bytes(), &e) != nil || (e.Stage != "ResponseComplete" && e.Stage != "ResponseStarted") {
			continue
		}
		prev, seen := byID[e.AuditID]
		if !seen {
			order = append(order, e.AuditID)
		}
		if !seen || prev.Stage != "ResponseComplete" {
			byID[e.AuditID] = e
		}
	}
	var out []auditEvent
	for _, id := range order {
		if e := byID[id]; match(e) {
			out = append(out, e)
		}
	}
	return out
}

// clusterCA is the cluster's client CA: envtest's API server trusts it for client certificates (it is an
// envtest.Authn), the harness's admin user has a certificate from it, and the harness signs kubelets' CSRs
// with it.
type clusterCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	dir     string
}

func newClusterCA() (*clusterCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "osm-e2e-cluster-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &clusterCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func (c *clusterCA) path() string { return filepath.Join(c.dir, "osm-e2e-client-ca.crt") }

// Configure, Start, AddUser and Stop make clusterCA an envtest.Authn.
func (c *clusterCA) Configure(workDir string, args *envtest.Arguments) error {
	c.dir = workDir
	args.Set("client-ca-file", c.path())
	return nil
}

func (c *clusterCA) Start() error { return os.WriteFile(c.path(), c.certPEM, 0o644) }

func (c *clusterCA) Stop() error { return nil }

func (c *clusterCA) AddUser(user envtest.User, base *rest.Config) (*rest.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	certPEM, err := c.issue(pkix.Name{CommonName: user.Name, Organization: user.Groups}, &key.PublicKey, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData = certPEM
	cfg.KeyData = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return cfg, nil
}

// sign issues the certificate a CSR asks for, for client authentication only, as the kubernetes.io/
// kube-apiserver-client-kubelet signer does.
func (c *clusterCA) sign(csrPEM []byte, usages []certificatesv1.KeyUsage) ([]byte, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("spec.request is not a PEM certificate request")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, err
	}
	for _, u := range usages {
		if u != certificatesv1.UsageClientAuth && u != certificatesv1.UsageDigitalSignature && u != certificatesv1.UsageKeyEncipherment {
			return nil, fmt.Errorf("usage %q is not one of a kubelet client certificate", u)
		}
	}
	return c.issue(req.Subject, req.PublicKey, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
}

func (c *clusterCA) issue(subject pkix.Name, pub any, eku []x509.ExtKeyUsage) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject,
		NotBefore: time.Now().Add(-5 * time.Minute), NotAfter: time.Now().Add(12 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: eku,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, pub, c.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// mirror serves the binary mirror on 127.0.0.1 and records every request (the node's downloads).
type mirror struct {
	URL  string
	mu   sync.Mutex
	reqs []mirrorRequest
	log  *os.File
}

type mirrorRequest struct {
	Path   string
	Status int
	Agent  string
}

func startMirror(t *testing.T, dir, logPath string) *mirror {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	m := &mirror{log: logFile}
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		files.ServeHTTP(rec, r)
		m.mu.Lock()
		defer m.mu.Unlock()
		m.reqs = append(m.reqs, mirrorRequest{Path: r.URL.Path, Status: rec.status, Agent: r.UserAgent()})
		fmt.Fprintf(m.log, "%s %s %s %d %q\n", time.Now().Format(time.RFC3339), r.RemoteAddr, r.URL.Path, rec.status, r.UserAgent())
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() { srv.Close(); logFile.Close() })
	m.URL = srv.URL
	return m
}

// requests returns the requests for paths with the prefix.
func (m *mirror) requests(prefix string) []mirrorRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []mirrorRequest
	for _, r := range m.reqs {
		if strings.HasPrefix(r.Path, prefix) {
			out = append(out, r)
		}
	}
	return out
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
