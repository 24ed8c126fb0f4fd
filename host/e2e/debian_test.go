//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/encode/cloudinit/cloudinittest"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
)

// Names the default plugins give things on the node. They are part of the node's interface for operators
// (plugins/internal/node/paths.go); the harness names them here rather than importing the plugin's package,
// so that a rename shows up as a failing e2e test.
const (
	bootstrapUnit = "osm-bootstrap.service"
	setupUnit     = "osm-setup.service"
	kubeletUnit   = "kubelet.service"
	containerd    = "containerd.service"
	caPath        = "/etc/kubernetes/pki/ca.crt"
	setupDone     = "/var/lib/osm/setup.done"
	kubeletConfig = "/var/lib/kubelet/kubeconfig"
)

// debianUnits are the units whose states the report publishes for Debian nodes.
var debianUnits = []string{"cloud-init-local.service", "cloud-init.service", "cloud-config.service", "cloud-final.service",
	bootstrapUnit, setupUnit, containerd, kubeletUnit, "osm-health-monitor.timer", "systemd-sysctl.service", "systemd-modules-load.service"}

// TestNodes runs the node scenarios against one control plane and one controller.
func TestNodes(t *testing.T) {
	c := startCluster(t)
	c.startOSM(t, func(o *app.Options) {
		// The conformance runs (Scaffolded*) pull their plugins from a registry in this process, over plain HTTP.
		o.Plugins.Registry.PlainHTTP = true
	})
	// containerdSource=preinstalled: the rootfs has containerd 2.x (hack/e2e-node/rootfs.sh), because Docker's
	// repository, the plugin's default source, is not reachable here and Debian 12's containerd is too old.
	osp := c.airgappedProfile(t, "osp-debian-12", "osp-debian-12-airgapped", map[string]string{"containerdSource": "preinstalled"})

	t.Run("DebianJoins", func(t *testing.T) { testDebianJoins(t, c, osp) })
	t.Run("ScaffoldedPluginJoins", func(t *testing.T) { testScaffoldedPluginJoins(t, c, osp) })
	t.Run("ScaffoldedIgnitionPluginConforms", func(t *testing.T) { testScaffoldedIgnitionPluginConforms(t, c) })
	t.Run("MicroOSPluginConforms", func(t *testing.T) { testMicroOSPluginConforms(t, c) })
	t.Run("WrongCAIsRejected", func(t *testing.T) { testWrongCA(t, c, osp) })
	t.Run("TamperedBootstrapIsRefused", func(t *testing.T) { testTamperedBootstrap(t, c, osp) })
	t.Run("RevokedProvisioningTokenFails", func(t *testing.T) { testRevokedToken(t, c, osp) })
	t.Run("FlatcarIgnitionFiles", func(t *testing.T) { testFlatcarIgnition(t, c) })
	t.Run("ExpiredProvisioningTokenFails", func(t *testing.T) { testExpiredToken(t, c, osp) })
	t.Run("PackageFailureIsReported", func(t *testing.T) { testPackageFailureIsReported(t, c) })
}

// testExpiredToken boots a machine whose bootstrap token expired: the controller extends a token while its
// MachineDeployment exists, so the case sets the expiry of the token Secret ten minutes into the past, as it
// would be after the controller was down for the token's lifetime. The API server must refuse the token only
// once its expiry passed (it authenticated before, and nothing but the expiry changed), and the bootstrap
// fails with 401 and says the token is invalid or expired.
func testExpiredToken(t *testing.T, c *cluster, osp *osmv1alpha1.OperatingSystemProfile) {
	ctx := context.Background()
	md := c.createMD(t, "e2e-expiry", "debian", osp.Name)
	boot, _ := c.userData(t, md)
	token := provisioningToken(t, boot.Data[render.CloudConfigKey])
	if !c.authenticates(t, token) {
		t.Fatal("the bootstrap token does not authenticate before its expiry")
	}
	s := c.bootstrapTokenSecret(t, md)
	expired := time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	patch := client.MergeFrom(s.DeepCopy())
	s.Data["expiration"] = []byte(expired)
	if err := c.c.Patch(ctx, s, patch); err != nil {
		t.Fatal(err)
	}
	// The API server reads bootstrap tokens from an informer: poll until it has seen the change.
	testenv.Eventually(t, 30*time.Second, "the API server refusing the token whose Secret says it expired at "+expired, func() error {
		if c.authenticates(t, token) {
			return fmt.Errorf("the token still authenticates")
		}
		return nil
	})
	t.Logf("the API server refuses the token that expired at %s", expired)
	n, r := bootUntilBootstrapFails(t, "e2e-expired-0", machineUserData(boot.Data[render.CloudConfigKey], "e2e-expired-0"))
	expectRefusal(t, c, n, r, md, render.ProvisioningSecretName(md), 401)
}

// authenticates reports whether the API server accepts token.
func (c *cluster) authenticates(t *testing.T, token string) bool {
	t.Helper()
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	res, err := c.cs.AuthenticationV1().TokenReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenReview: %v", err)
	}
	return res.Status.Authenticated
}

// testDebianJoins boots a Debian node from the bootstrap user-data of a MachineDeployment and follows it until
// its kubelet asks the API server for a client certificate with the MachineDeployment's bootstrap token.
func testDebianJoins(t *testing.T, c *cluster, osp *osmv1alpha1.OperatingSystemProfile) {
	bootAndJoin(t, c, osp, "e2e-debian", applySiteExtension(t, c, osp))
}

// bootAndJoin creates a Debian MachineDeployment named mdName for the profile, boots a node from its user-data
// and checks every step of the join; with site, also that the site extension reached the node.
func bootAndJoin(t *testing.T, c *cluster, osp *osmv1alpha1.OperatingSystemProfile, mdName string, site *osmv1alpha1.OperatingSystemProfileExtension) {
	md := c.createMD(t, mdName, "debian", osp.Name)
	reports := c.watchReports(t, md)
	boot, prov := c.userData(t, md)
	cloudinittest.Validate(t, boot.Name, boot.Data[render.CloudConfigKey])
	cloudinittest.Validate(t, prov.Name, prov.Data[render.CloudConfigKey])
	bootstrapUser := "system:bootstrap:" + c.bootstrapTokenID(t, md)
	// machine-controller never creates edge machines, so nothing would replace <MACHINE_NAME>: an edge machine is
	// named after its MachineDeployment in the user-data itself, as upstream OSM does (and so is its Node).
	nodeName := md.Name
	if bytes.Contains(boot.Data[render.CloudConfigKey], []byte(render.MachineNamePlaceholder)) {
		t.Errorf("the edge bootstrap user-data still holds %s", render.MachineNamePlaceholder)
	}
	userData := machineUserData(boot.Data[render.CloudConfigKey], nodeName)
	t.Logf("bootstrap user-data: %d bytes; provisioning: %d bytes", len(userData), len(prov.Data[render.CloudConfigKey]))

	n := bootNode(t, nodeOptions{Name: nodeName, UserData: userData, Units: debianUnits, Lifetime: 12 * time.Minute})

	// The kubelet's CSR is the end of the chain: bootstrap fetch, provisioning, downloads from the mirror,
	// containerd, kubelet with the bootstrap token. Fail fast when a unit on the way fails.
	csr, err := c.waitForCSR(n, bootstrapUser, 9*time.Minute, bootstrapUnit, setupUnit)
	if err != nil {
		r := n.collect()
		r.diagnose(t, bootstrapUnit, setupUnit, containerd, kubeletUnit)
		t.Fatal(err)
	}
	t.Logf("CSR %s: username=%s groups=%v signer=%s usages=%v", csr.Name, csr.Spec.Username, csr.Spec.Groups, csr.Spec.SignerName, csr.Spec.Usages)

	// Stretch: approve and sign the kubelet's CSRs as kube-controller-manager would, and follow the kubelet
	// further.
	registered, certErr := c.signUntilRegistered(t, n, bootstrapUser, nodeName)
	reportErr := reports.waitFor(nodeName, osmv1alpha1.PhaseNodeRegistered, 2*time.Minute)
	// The node's sysctls land in the host's kernel, which collect restores: read the extension's now.
	var sysctl siteSysctlState
	if site != nil {
		sysctl = readSiteSysctl(n)
	}
	r := n.collect()

	t.Run("bootstrap fetched the provisioning config over TLS verified with the cluster CA", func(t *testing.T) {
		checkBootstrapFetch(t, c, md, n, r, boot, prov)
	})
	t.Run("provisioning files are in place with the OSC's modes and contents", func(t *testing.T) {
		checkProvisioningFiles(t, c, md, n, boot, prov)
	})
	t.Run("units are enabled and started", func(t *testing.T) {
		checkUnits(t, c, md, n, r)
	})
	t.Run("cloud-init recorded the handoff's run as finished", func(t *testing.T) {
		checkCloudInitFinished(t, r)
	})
	t.Run("binaries came from the local mirror, checksums verified", func(t *testing.T) {
		checkMirror(t, c)
	})
	t.Run("kubelet asked for its certificate with the bootstrap token", func(t *testing.T) {
		checkCSR(t, c, csr, bootstrapUser, nodeName)
	})
	if site != nil {
		t.Run("the site extension is on the node: files, bootcmd and runcmd effects, sysctl and CA trust", func(t *testing.T) {
			checkSiteExtension(t, n, site, sysctl)
		})
	}
	t.Run("kubelet got its certificate and registered the Node (stretch)", func(t *testing.T) {
		checkRegistration(t, c, n, r, certErr, registered, nodeName)
	})
	t.Run("the node reported every phase into the OSC", func(t *testing.T) {
		t.Logf("%s (%v)", checkReportedPhases(t, c, reports, nodeName), reportErr)
	})
	if t.Failed() {
		r.diagnose(t, bootstrapUnit, setupUnit, containerd, kubeletUnit)
	}
}

// waitForCSR waits until the kubelet on n has asked for its certificate as username, and fails as soon as one of
// the units on the way there (units) has failed.
func (c *cluster) waitForCSR(n *node, username string, timeout time.Duration, units ...string) (*certificatesv1.CertificateSigningRequest, error) {
	return c.waitForCSRUnless(n, username, timeout, nil, units...)
}

// checkCloudInitFinished: the bootstrap re-runs cloud-init with the provisioning config; that run must end
// with a result, so that `cloud-init status --wait` (which operators and image tooling use) returns instead
// of waiting forever on a run that never finishes.
func checkCloudInitFinished(t testing.TB, r *report) {
	status, wait := r.file("cloud-init-status.txt"), r.file("cloud-init-status-wait.txt")
	if strings.Contains(status, "status: running") || !strings.Contains(wait, "exit status 0 ") {
		t.Errorf("cloud-init still reports a running run:\n%s\n--- status --wait ---\n%s", firstLines(status, 6), wait)
	}
	var result struct {
		V1 struct {
			Errors []string `json:"errors"`
		} `json:"v1"`
	}
	raw := r.file("result.json")
	if err := json.Unmarshal([]byte(raw), &result); err != nil {
		t.Fatalf("/run/cloud-init/result.json: %v (%q)", err, raw)
	}
	if len(result.V1.Errors) > 0 {
		t.Errorf("cloud-init's result has errors: %v", result.V1.Errors)
	}
	t.Logf("cloud-init status --long:\n%s", firstLines(status, 4))
}

func checkBootstrapFetch(t *testing.T, c *cluster, md *clusterv1alpha1.MachineDeployment, n *node, r *report, boot, prov *corev1.Secret) {
	// The node verifies the API server with the CA of kube-public/cluster-info, which signed its serving
	// certificate.
	if got := n.file(caPath); !bytes.Equal(bytes.TrimSpace(got.content), bytes.TrimSpace(c.cfg.CAData)) {
		t.Errorf("%s on the node is not the cluster CA from cluster-info:\n%s", caPath, got.content)
	}
	// The fetch uses that CA and never turns verification off.
	var script string
	for _, f := range cloudConfigFiles(t, boot.Data[render.CloudConfigKey]) {
		if strings.Contains(string(f.Content), render.ProvisioningSecretName(md)) {
			script = string(f.Content)
		}
	}
	switch {
	case script == "":
		t.Errorf("no bootstrap file names the provisioning Secret %s", render.ProvisioningSecretName(md))
	case !strings.Contains(script, "--cacert "+caPath):
		t.Errorf("the bootstrap fetch does not verify with --cacert %s", caPath)
	case strings.Contains(script, " -k ") || strings.Contains(script, "--insecure"):
		t.Errorf("the bootstrap fetch disables TLS verification")
	}

	// What the bootstrap fetched is the provisioning Secret's cloud-config, byte for byte; the handoff kept a
	// copy (in /run/osm, saved by the report, or in /etc/cloud/cloud.cfg.d).
	want := prov.Data[render.CloudConfigKey]
	var copies []string
	for _, dir := range []string{filepath.Join(r.dir, "run-osm"), filepath.Join(n.root, "etc/cloud/cloud.cfg.d")} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && bytes.Equal(data, want) {
				copies = append(copies, filepath.Join(dir, e.Name()))
			}
		}
	}
	if len(copies) == 0 {
		t.Errorf("no file on the node holds the provisioning Secret's cloud-config (looked in /run/osm and /etc/cloud/cloud.cfg.d)")
	} else {
		t.Logf("the fetched provisioning config on the node: %v", copies)
	}

	// The bootstrap unit ran to its end and said nothing about refused tokens or TLS.
	st := r.units[bootstrapUnit]
	journal := r.unitJournal(bootstrapUnit)
	if st["Result"] != "success" || st.restarts() != 0 {
		t.Errorf("%s: %s", bootstrapUnit, st)
	}
	// The script's own messages (prefixed with its name) report refusals, TLS failures and retries.
	if bad := grepLines(journal, `osm-bootstrap: .*(refused|TLS|curl exit|retrying)|curl: \(`); len(bad) > 0 {
		t.Errorf("%s journal reports problems:\n%s", bootstrapUnit, strings.Join(bad, "\n"))
	}
	t.Logf("%s journal:\n%s", bootstrapUnit, tail(journal, 15))

	// The API server saw the read: the MachineDeployment's bootstrap token, from the node (curl on 127.0.0.1),
	// answered 200. curl only talks after verifying the serving certificate with --cacert.
	sa := "system:bootstrap:" + c.bootstrapTokenID(t, md)
	reads := c.audit(t, func(e auditEvent) bool {
		return e.Verb == "get" && e.ObjectRef != nil && e.ObjectRef.Name == render.ProvisioningSecretName(md) && e.User.Username == sa
	})
	ok := slices.ContainsFunc(reads, func(e auditEvent) bool {
		return e.ResponseStatus != nil && e.ResponseStatus.Code == 200 && strings.HasPrefix(e.UserAgent, "curl/") && slices.Contains(e.SourceIPs, "127.0.0.1")
	})
	if !ok {
		t.Errorf("the audit log (%s) has no successful GET of %s by %s from curl: %v", c.auditLog, render.ProvisioningSecretName(md), sa, reads)
	}
	for _, e := range reads {
		t.Logf("audit: %s", e)
	}
}

// checkProvisioningFiles compares the node's files with the OperatingSystemConfig (paths, modes) and with the
// provisioning Secret (exact contents, with the credentials the OSC holds as placeholders).
func checkProvisioningFiles(t testing.TB, c *cluster, md *clusterv1alpha1.MachineDeployment, n *node, boot, prov *corev1.Secret) {
	osc := &osmv1alpha1.OperatingSystemConfig{}
	if err := c.c.Get(context.Background(), client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(md)}, osc); err != nil {
		t.Fatal(err)
	}
	// Every file of the provisioning Secret (the OSC's files plus the unit files and drop-ins of its units) is on
	// the node with its mode and content.
	secretFiles := cloudConfigFiles(t, prov.Data[render.CloudConfigKey])
	for _, sf := range secretFiles {
		got := n.file(sf.Path)
		switch {
		case !got.exists:
			t.Errorf("%s: missing on the node", sf.Path)
		case uint32(got.mode.Perm()) != sf.Mode:
			t.Errorf("%s: mode %04o on the node, %04o in the provisioning Secret", sf.Path, got.mode.Perm(), sf.Mode)
		case !bytes.Equal(got.content, sf.Content):
			t.Errorf("%s: content on the node differs from the provisioning Secret's\n--- node ---\n%s\n--- secret ---\n%s", sf.Path, firstLines(string(got.content), 10), firstLines(string(sf.Content), 10))
		}
	}
	// The Secret carries the OSC's files with the OSC's modes.
	if len(osc.Spec.ProvisioningConfig.Files) == 0 {
		t.Fatal("the OSC has no provisioning files")
	}
	for _, f := range osc.Spec.ProvisioningConfig.Files {
		sf := fileByPath(secretFiles, f.Path)
		switch {
		case sf == nil:
			t.Errorf("%s: in the OSC but not in the provisioning Secret", f.Path)
		case os.FileMode(sf.Mode) != permissions(f.Permissions):
			t.Errorf("%s: mode %04o in the Secret, the OSC says %04o", f.Path, sf.Mode, permissions(f.Permissions))
		}
	}
	for _, u := range osc.Spec.ProvisioningConfig.Units {
		if u.Content != nil && *u.Content != "" && fileByPath(secretFiles, "/etc/systemd/system/"+u.Name) == nil {
			t.Errorf("unit %s: in the OSC but its file is not in the provisioning Secret", u.Name)
		}
	}
	t.Logf("%d files of the provisioning Secret (%d files and %d units in the OSC) checked on the node", len(secretFiles), len(osc.Spec.ProvisioningConfig.Files), len(osc.Spec.ProvisioningConfig.Units))
	// The bootstrap's own files too (the machine name is machine-controller's substitution).
	for _, f := range osc.Spec.BootstrapConfig.Files {
		if got := n.file(f.Path); !got.exists || got.mode.Perm() != permissions(f.Permissions) {
			t.Errorf("bootstrap file %s: exists=%v mode %04o, the OSC says %04o", f.Path, got.exists, got.mode.Perm(), permissions(f.Permissions))
		}
	}
}

func permissions(p *int32) os.FileMode {
	v := int32(644)
	if p != nil {
		v = *p
	}
	var mode os.FileMode
	for _, d := range fmt.Sprint(v) {
		mode = mode*8 + os.FileMode(d-'0')
	}
	return mode
}

// checkUnits: every unit the OSC enables is enabled, masked ones are masked, and the ones that must run did.
func checkUnits(t *testing.T, c *cluster, md *clusterv1alpha1.MachineDeployment, n *node, r *report) {
	osc := &osmv1alpha1.OperatingSystemConfig{}
	if err := c.c.Get(context.Background(), client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(md)}, osc); err != nil {
		t.Fatal(err)
	}
	for _, u := range osc.Spec.ProvisioningConfig.Units {
		switch {
		case u.Mask != nil && *u.Mask:
			if !n.masked(u.Name) {
				t.Errorf("%s: the OSC masks it; not masked on the node", u.Name)
			}
		case u.Enable != nil && *u.Enable:
			if ok, _ := n.enabledIn(u.Name); !ok {
				t.Errorf("%s: the OSC enables it; not enabled on the node", u.Name)
			}
		}
	}
	// No unit failed, except the ones this host cannot run, which a real node can.
	env := environmentFailures()
	for _, u := range r.failed {
		if reason, ok := env[u]; ok {
			t.Logf("%s failed, as expected on this host: %s", u, reason)
		} else {
			t.Errorf("unit %s failed:\n%s", u, tail(r.unitJournal(u), 15))
		}
	}
	if !n.file(setupDone).exists {
		t.Errorf("%s is missing: osm-setup did not finish", setupDone)
	}
	if st := r.units[setupUnit]; st["Result"] != "success" || st.restarts() != 0 {
		t.Errorf("%s: %s", setupUnit, st)
	}
	if st := r.units[containerd]; !st.active() {
		t.Errorf("%s: %s", containerd, st)
	}
	if st := r.units["osm-health-monitor.timer"]; !st.active() {
		t.Errorf("osm-health-monitor.timer: %s", st)
	}
	// The kubelet was started by osm-setup and ran with the bootstrap kubeconfig (its CSR is checked
	// separately); whether it keeps running on this host is the stretch check's business.
	if j := r.unitJournal(kubeletUnit); !strings.Contains(j, "Started kubelet.service") {
		t.Errorf("kubelet.service was never started:\n%s", tail(j, 20))
	}
	t.Logf("units: %s=%s; %s=%s; %s=%s", setupUnit, r.units[setupUnit], containerd, r.units[containerd], kubeletUnit, r.units[kubeletUnit])
}

// environmentFailures are the units that fail on a node booted here for reasons of this host, not of what OSM
// provisioned, with the reason.
func environmentFailures() map[string]string {
	out := map[string]string{}
	if fs, err := os.ReadFile("/proc/filesystems"); err == nil && !strings.Contains(string(fs), "rpc_pipefs") {
		out["run-rpc_pipefs.mount"] = "the host kernel has no SUNRPC (no rpc_pipefs in /proc/filesystems), which nfs-common's mount needs; Debian's kernels have it"
	}
	return out
}

func checkMirror(t *testing.T, c *cluster) {
	want := []string{
		"/kubernetes/" + harness.KubeVersion + "/bin/linux/amd64/kubelet",
		"/kubernetes/" + harness.KubeVersion + "/bin/linux/amd64/kubeadm",
		"/kubernetes/" + harness.KubeVersion + "/bin/linux/amd64/kubectl",
		"/cni/" + harness.CNIVersion + "/cni-plugins-linux-amd64-" + harness.CNIVersion + ".tgz",
		"/cri-tools/" + harness.CRICtlVersion + "/crictl-" + harness.CRICtlVersion + "-linux-amd64.tar.gz",
	}
	for _, p := range want {
		for _, path := range []string{p, p + ".sha256"} {
			reqs := c.mirror.requests(path)
			if !slices.ContainsFunc(reqs, func(r mirrorRequest) bool { return r.Path == path && r.Status == 200 }) {
				t.Errorf("the node never downloaded %s from the mirror (requests: %v)", path, reqs)
			}
		}
	}
	if bad := slices.DeleteFunc(c.mirror.requests("/"), func(r mirrorRequest) bool { return r.Status == 200 }); len(bad) > 0 {
		t.Errorf("failed mirror requests: %v", bad)
	}
}

func checkCSR(t testing.TB, c *cluster, csr *certificatesv1.CertificateSigningRequest, bootstrapUser, nodeName string) {
	if csr.Spec.Username != bootstrapUser {
		t.Errorf("CSR username %q, want %q", csr.Spec.Username, bootstrapUser)
	}
	for _, g := range []string{"system:bootstrappers", credentials.NodeBootstrapGroup, "system:authenticated"} {
		if !slices.Contains(csr.Spec.Groups, g) {
			t.Errorf("CSR groups %v lack %s", csr.Spec.Groups, g)
		}
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		t.Errorf("CSR signer %q", csr.Spec.SignerName)
	}
	// What kube-controller-manager's approver requires of a node client certificate.
	if subj := csrSubject(t, csr.Spec.Request); subj.CommonName != "system:node:"+nodeName || !slices.Equal(subj.Organization, []string{"system:nodes"}) {
		t.Errorf("CSR subject CN=%q O=%v, want CN=system:node:%s O=[system:nodes]", subj.CommonName, subj.Organization, nodeName)
	}
	creates := c.audit(t, func(e auditEvent) bool {
		return e.Verb == "create" && e.ObjectRef != nil && e.ObjectRef.Resource == "certificatesigningrequests" && e.User.Username == bootstrapUser
	})
	if !slices.ContainsFunc(creates, func(e auditEvent) bool {
		return e.ResponseStatus != nil && e.ResponseStatus.Code == 201 && strings.HasPrefix(e.UserAgent, "kubelet/"+harness.KubeVersion)
	}) {
		t.Errorf("the audit log has no CSR created by the kubelet %s as %s: %v", harness.KubeVersion, bootstrapUser, creates)
	}
	for _, e := range creates {
		t.Logf("audit: %s", e)
	}
}

// checkRegistration is the stretch goal: the signed certificate reached the kubelet, which then registers its
// Node with it.
func checkRegistration(t testing.TB, c *cluster, n *node, r *report, certErr error, registered *corev1.Node, nodeName string) {
	if certErr != nil {
		t.Fatalf("%v", certErr)
	}
	kubeconfig := n.file(kubeletConfig)
	if !kubeconfig.exists {
		t.Errorf("the kubelet wrote no %s", kubeletConfig)
	}
	if registered == nil {
		lines := grepLines(r.unitJournal(kubeletUnit), `(?i)error|fail`)
		t.Fatalf("Node %s did not register within 2m of the certificate. kubelet errors:\n%s", nodeName, tail(strings.Join(lines, "\n"), 15))
	}
	if st := r.units[kubeletUnit]; !st.active() {
		t.Errorf("%s is not running after the Node registered: %s", kubeletUnit, st)
	}
	t.Logf("Node %s registered: kubelet %s, conditions %v", registered.Name, registered.Status.NodeInfo.KubeletVersion, registered.Status.Conditions)
	if registered.Status.NodeInfo.KubeletVersion != harness.KubeVersion {
		t.Errorf("Node kubeletVersion %q, want %s", registered.Status.NodeInfo.KubeletVersion, harness.KubeVersion)
	}
}

// kubeletCertDir is the kubelet's --cert-dir from the node's kubelet.service (the kubelet's default when unset).
func kubeletCertDir(n *node) string {
	unit := string(n.file("/etc/systemd/system/" + kubeletUnit).content)
	if m := regexp.MustCompile(`--cert-dir=(\S+)`).FindStringSubmatch(unit); m != nil {
		return m[1]
	}
	return "/var/lib/kubelet/pki"
}

// testWrongCA: a bootstrap whose CA did not sign the API server's certificate never talks to the API server:
// the fetch verifies TLS with the CA file and fails with curl's certificate error, which shows the positive
// case's fetch was verified with the cluster CA, not merely encrypted.
func testWrongCA(t *testing.T, c *cluster, osp *osmv1alpha1.OperatingSystemProfile) {
	md := c.createMD(t, "e2e-wrong-ca", "debian", osp.Name)
	boot, _ := c.userData(t, md)
	nodeName := "e2e-wrong-ca-0"
	// The harness's client CA: a real CA, but not the one that signed the serving certificate.
	userData := rewriteCloudConfig(t, machineUserData(boot.Data[render.CloudConfigKey], nodeName),
		strings.TrimSpace(string(c.cfg.CAData)), strings.TrimSpace(string(c.ca.certPEM)))
	n, r := bootUntilBootstrapFails(t, nodeName, userData)
	journal := r.unitJournal(bootstrapUnit)
	tls := grepLines(journal, `curl: \(60\)|curl exit 60`)
	if len(tls) == 0 {
		t.Errorf("%s journal shows no certificate verification failure (curl exit 60):\n%s", bootstrapUnit, tail(journal, 20))
	}
	for _, l := range tls {
		t.Logf("%s", l)
	}
	if reads := c.audit(t, func(e auditEvent) bool {
		return e.ObjectRef != nil && e.ObjectRef.Name == render.ProvisioningSecretName(md) && strings.HasPrefix(e.UserAgent, "curl/")
	}); len(reads) > 0 {
		t.Errorf("the node reached the API server although it cannot have verified it: %v", reads)
	}
	if n.file("/etc/kubernetes/bootstrap-kubelet.conf").exists {
		t.Error("provisioning files on the node although the fetch failed")
	}
}

// testTamperedBootstrap: a node whose bootstrap names another MachineDeployment's provisioning Secret is
// refused (403), and the bootstrap unit fails saying so.
func testTamperedBootstrap(t *testing.T, c *cluster, osp *osmv1alpha1.OperatingSystemProfile) {
	a := c.createMD(t, "e2e-tamper-a", "debian", osp.Name)
	b := c.createMD(t, "e2e-tamper-b", "debian", osp.Name)
	bootA, _ := c.userData(t, a)
	c.userData(t, b)
	nodeName := "e2e-tampered-0"
	userData := rewriteCloudConfig(t, machineUserData(bootA.Data[render.CloudConfigKey], nodeName), render.ProvisioningSecretName(a), render.ProvisioningSecretName(b))
	cloudinittest.Validate(t, "tampered user-data", userData)

	n, r := bootUntilBootstrapFails(t, nodeName, userData)
	expectRefusal(t, c, n, r, a, render.ProvisioningSecretName(b), 403)
}

// testRevokedToken: a node whose credential no longer works (its bootstrap token Secret was deleted, which
// revokes it at once) fails its bootstrap with a clear message instead of appearing to succeed.
func testRevokedToken(t *testing.T, c *cluster, osp *osmv1alpha1.OperatingSystemProfile) {
	ctx := context.Background()
	md := c.createMD(t, "e2e-revoked", "debian", osp.Name)
	boot, _ := c.userData(t, md)
	token := provisioningToken(t, boot.Data[render.CloudConfigKey])
	if err := c.c.Delete(ctx, c.bootstrapTokenSecret(t, md)); err != nil {
		t.Fatalf("deleting the bootstrap token: %v", err)
	}
	// The API server must reject the token before the node boots (the controller issues a new token at the
	// MachineDeployment's next reconcile, with a new secret half, which does not bring the old one back).
	testenv.Eventually(t, 30*time.Second, "the API server refusing the bootstrap token whose Secret was deleted", func() error {
		if c.authenticates(t, token) {
			return fmt.Errorf("the token still authenticates")
		}
		return nil
	})
	nodeName := "e2e-revoked-0"
	n, r := bootUntilBootstrapFails(t, nodeName, machineUserData(boot.Data[render.CloudConfigKey], nodeName))
	expectRefusal(t, c, n, r, md, render.ProvisioningSecretName(md), 401)
}

// bootUntilBootstrapFails boots a Debian node that is expected not to get its provisioning config, and returns
// it once its bootstrap unit has failed (or ends the test with the node's diagnosis if it does not).
func bootUntilBootstrapFails(t *testing.T, name string, userData []byte) (*node, *report) {
	t.Helper()
	n := bootNode(t, nodeOptions{Name: name, UserData: userData, Units: debianUnits, Lifetime: 5 * time.Minute})
	err := n.waitUntil(bootstrapUnit+" fails", 3*time.Minute, func(st map[string]unitState) (bool, error) {
		return st[bootstrapUnit].failedOnce(), nil
	})
	r := n.collect()
	if err != nil {
		r.diagnose(t, bootstrapUnit)
		t.Fatal(err)
	}
	return n, r
}

// expectRefusal checks a node whose bootstrap was refused: the unit failed with the HTTP status in its
// journal, the API server answered that status, and nothing of the provisioning stage reached the node.
func expectRefusal(t *testing.T, c *cluster, n *node, r *report, md *clusterv1alpha1.MachineDeployment, secret string, code int) {
	t.Helper()
	st := r.units[bootstrapUnit]
	journal := r.unitJournal(bootstrapUnit)
	refused := grepLines(journal, fmt.Sprintf(`HTTP %d`, code))
	if len(refused) == 0 {
		t.Errorf("%s journal does not show HTTP %d:\n%s", bootstrapUnit, code, tail(journal, 20))
	} else {
		t.Logf("%s: %s; journal: %s", bootstrapUnit, st, refused[0])
	}
	if exit := grepLines(journal, `Main process exited, code=exited, status=1|Failed with result`); len(exit) == 0 {
		t.Errorf("%s journal shows no failed exit:\n%s", bootstrapUnit, tail(journal, 20))
	}
	refusedReads := c.audit(t, func(e auditEvent) bool {
		return e.Verb == "get" && strings.Contains(e.RequestURI, "/secrets/"+secret) && e.ResponseStatus != nil && e.ResponseStatus.Code == code
	})
	if len(refusedReads) == 0 {
		t.Errorf("the audit log has no GET of %s answered %d", secret, code)
	} else {
		t.Logf("audit: %s", refusedReads[0])
	}
	if ok := c.audit(t, func(e auditEvent) bool {
		return e.Verb == "get" && strings.Contains(e.RequestURI, "/secrets/"+secret) && e.ResponseStatus != nil && e.ResponseStatus.Code == 200 && strings.HasPrefix(e.UserAgent, "curl/")
	}); len(ok) > 0 {
		t.Errorf("a node read %s: %v", secret, ok)
	}
	for _, p := range []string{"/etc/kubernetes/bootstrap-kubelet.conf", "/etc/systemd/system/" + kubeletUnit, setupDone} {
		if n.file(p).exists {
			t.Errorf("%s exists although the provisioning config was refused", p)
		}
	}
	// The trap NODE-E2E.md warns about: cloud-init itself reports success.
	t.Logf("cloud-init status --long (not to be trusted):\n%s", firstLines(r.file("cloud-init-status.txt"), 6))
}

func csrSubject(t testing.TB, req []byte) pkix.Name {
	t.Helper()
	block, _ := pem.Decode(req)
	if block == nil {
		t.Fatal("CSR request is not PEM")
	}
	cr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cr.Subject
}
