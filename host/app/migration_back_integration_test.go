package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/migrate"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins"
)

// TestMigrationBackToUpstream is docs/migration.md's way back, from the captured cluster upstream v1.11.2 left
// (testdata/upstream-v1.11.2/capture) after OSM took it over: OSM stopped, `osmctl migrate back` (its package,
// host/migrate), upstream's CRDs and RBAC restored. Its dry run changes nothing, names a profile written for OSM
// that a MachineDeployment uses and refuses to go on while one does; once the operator points that
// MachineDeployment at a default profile, it restores upstream's getter ServiceAccount, token Secret, Role and
// RoleBinding exactly as upstream's manifests had them (the token filled by the token controller, played here by
// the test), and leaves no object OSM created (user-data and kubelet bootstrap Secrets, OSCs, bootstrap tokens,
// reader Roles and RoleBindings) and no user-data Secret upstream would not overwrite. Running it again finds
// nothing to do. TestMigrationBackRunsUpstream then runs upstream's own controller on the result.
func TestMigrationBackToUpstream(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	goBack(t, env)
}

// TestMigrationBackRunsUpstream is TestMigrationBackToUpstream followed by upstream's own controller, built
// outside the repository (../shared/bench/build-upstream.sh) and named by OSM_UPSTREAM_BIN; without it the test
// is skipped (CI cannot build upstream). Upstream renders every MachineDeployment again, with its own immutable
// Secrets and OSCs, and puts its default profiles back.
func TestMigrationBackRunsUpstream(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("OSM_UPSTREAM_BIN")
	if bin == "" {
		t.Skip("OSM_UPSTREAM_BIN names no upstream osm-controller binary (see ../shared/bench/build-upstream.sh)")
	}
	env := testenv.Start(t, testenv.Options{})
	mds := goBack(t, env)
	ctx := context.Background()
	c := env.Client
	kubeconfig := impersonatingKubeconfig(t, env, "system:serviceaccount:kube-system:operating-system-manager")
	p := startBinary(t, bin, nil, "-kubeconfig="+kubeconfig, "-namespace=kube-system", "-leader-elect=false",
		"-cluster-dns=10.10.10.10", "-metrics-address="+testenv.FreeAddress(t), "-health-probe-address="+testenv.FreeAddress(t))
	for _, md := range mds {
		eventually(t, wait, "upstream rendered "+md.Namespace+"/"+md.Name, func() error {
			for _, stage := range []string{"bootstrap", "provisioning"} {
				s := &corev1.Secret{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: md.Name + "-" + md.Namespace + "-" + stage + "-config"}, s); err != nil {
					return fmt.Errorf("%w\nupstream's log:\n%s", err, tail(p.output(), 2000))
				}
				if s.Immutable == nil || !*s.Immutable || s.Annotations["k8c.io/osp-version"] != "v1.11.2" {
					return fmt.Errorf("%s Secret is not upstream's: %v", stage, s.Annotations)
				}
			}
			return c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: md.Name + "-" + md.Namespace + "-config"}, &osmv1alpha1.OperatingSystemConfig{})
		})
	}
	osp := &osmv1alpha1.OperatingSystemProfile{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "osp-ubuntu"}, osp); err != nil || osp.Spec.Version != "v1.11.2" {
		t.Errorf("upstream did not put its osp-ubuntu back: %v %s", err, osp.Spec.Version)
	}
}

// goBack takes the captured cluster over with OSM and goes back (TestMigrationBackToUpstream), returning the
// MachineDeployments.
func goBack(t *testing.T, env *testenv.Env) []*clusterv1alpha1.MachineDeployment {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	mds, _ := leaveCapturedUpstream(t, env)
	getter := upstreamDocs(t, filepath.Join("capture", "20-getter.yaml"))
	removeUpstreamWebhooks(t, env)

	stop := takeOver(t, env, func(string) {})
	// A profile written for OSM (a plugin's, which upstream's CRD would refuse), and a MachineDeployment
	// naming it.
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defaults {
		if d.Name == "osp-ubuntu" {
			own := d.DeepCopy()
			own.Name, own.Namespace = "osp-ubuntu-plugin", osmNamespace
			if err := c.Create(ctx, own); err != nil {
				t.Fatal(err)
			}
		}
	}
	site := newMD(t, "site", "ubuntu", "aws", "osp-ubuntu-plugin")
	if err := c.Create(ctx, site); err != nil {
		t.Fatal(err)
	}
	mds = append(mds, site)

	for _, md := range mds {
		eventually(t, wait, "MachineDeployment "+md.Namespace+"/"+md.Name+" rendered by OSM", func() error { return renderedByOSM(ctx, c, md) })
	}
	stop()

	// osmctl migrate back --dry-run: the plugin profile a MachineDeployment uses blocks.
	before := snapshot(t, c)
	plan, err := migrate.NewPlan(ctx, c, migrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Blocking || len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0].String(), "osp-ubuntu-plugin") ||
		!strings.Contains(plan.Warnings[0].String(), "kube-system/site") {
		t.Errorf("the plan does not block on the plugin profile of kube-system/site: blocking %v, %v", plan.Blocking, plan.Warnings)
	}
	count := map[string]int{}
	for _, a := range plan.Actions {
		count[a.Verb+" "+fmt.Sprintf("%T", a.Object)]++
	}
	n := len(mds)
	want := map[string]int{
		// OSM's default profiles: upstream installs its own, and would render OSM's before replacing them
		"delete *v1alpha1.OperatingSystemProfile": len(defaults),
		"create *v1.ServiceAccount":               1, "create *v1.Secret": 1, "create *v1.Role": 1, "create *v1.RoleBinding": 1,
		// user-data Secrets (two each) and bootstrap tokens; plugin profiles need no kubelet bootstrap Secret
		"delete *v1.Secret":                      n * 3,
		"delete *v1alpha1.OperatingSystemConfig": n, "delete *v1alpha1.OperatingSystemNodeReport": n, "delete *v1.Role": n, "delete *v1.RoleBinding": n,
	}
	if !equality.Semantic.DeepEqual(count, want) {
		t.Errorf("the plan's changes: %v, want %v\n%v", count, want, plan.Actions)
	}
	if after := snapshot(t, c); !slices.Equal(before, after) {
		t.Errorf("planning changed the cluster")
	}

	// The operator's fix, then the real run, with the token controller's part played by the test.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"k8c.io/operating-system-profile":"osp-ubuntu"}}}`))
	if err := c.Patch(ctx, site.DeepCopy(), patch); err != nil {
		t.Fatal(err)
	}
	site.Annotations[clusterv1alpha1.AnnotationOSP] = "osp-ubuntu"
	plan, err = migrate.NewPlan(ctx, c, migrate.Options{TokenWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Blocking {
		t.Errorf("the plan still blocks: %v", plan.Warnings)
	}
	fillGetterTokens(t, env)
	var log []string
	if err := plan.Apply(ctx, c, func(s string) { log = append(log, s) }); err != nil {
		t.Fatalf("going back: %v\n%s", err, strings.Join(log, "\n"))
	}
	// Upstream's CRDs and RBAC back, OSM's RBAC that upstream's does not replace gone (the guide's kubectl
	// commands).
	useUpstreamCRDs(t, env)
	applyAll(t, env, upstreamDocs(t, "rbac-controller.yaml"))
	for _, o := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "operating-system-manager"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "operating-system-manager"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "operating-system-manager-cluster-info"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "operating-system-manager-cluster-info"}},
	} {
		if err := c.Delete(ctx, o); err != nil {
			t.Errorf("deleting OSM's %T %s: %v", o, o.GetName(), err)
		}
	}

	// Upstream's getter, as its manifests had it.
	for _, want := range getter {
		got := want.DeepCopy()
		if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
			t.Errorf("%s %s not restored: %v", want.GetKind(), want.GetName(), err)
			continue
		}
		for _, field := range []string{"rules", "roleRef", "subjects", "type"} {
			if !equality.Semantic.DeepEqual(want.Object[field], got.Object[field]) {
				t.Errorf("%s %s: %s %v, upstream had %v", want.GetKind(), want.GetName(), field, got.Object[field], want.Object[field])
			}
		}
		if want.GetKind() == "Secret" {
			s := &corev1.Secret{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, s); err != nil || len(s.Data["token"]) == 0 ||
				s.Annotations[corev1.ServiceAccountNameKey] != "cloud-init-getter" {
				t.Errorf("the getter token Secret holds no token for cloud-init-getter: %v %v", err, s.Annotations)
			}
		}
	}
	// Nothing of OSM's left, and no user-data Secret upstream would keep instead of writing its own.
	marked := client.HasLabels{credentials.LabelMachineDeployment}
	for _, l := range []struct {
		list client.ObjectList
		ns   string
	}{
		{&corev1.SecretList{}, userDataNS}, {&corev1.SecretList{}, "kube-system"}, {&rbacv1.RoleList{}, userDataNS},
		{&rbacv1.RoleBindingList{}, userDataNS}, {&corev1.ServiceAccountList{}, userDataNS},
		{&osmv1alpha1.OperatingSystemConfigList{}, osmNamespace},
	} {
		if err := c.List(ctx, l.list, client.InNamespace(l.ns), marked); err != nil {
			t.Fatal(err)
		}
		if items, _ := metaItems(l.list); len(items) > 0 {
			t.Errorf("OSM's %T left in %s: %v", l.list, l.ns, items)
		}
	}
	for _, md := range mds {
		for _, stage := range []string{"bootstrap", "provisioning"} {
			name := md.Name + "-" + md.Namespace + "-" + stage + "-config"
			if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
				t.Errorf("Secret %s is still there (%v): upstream would not write its own", name, err)
			}
		}
		cur := &clusterv1alpha1.MachineDeployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(md), cur); err != nil || !slices.Contains(cur.Finalizers, "kubermatic.io/cleanup-operating-system-configs") {
			t.Errorf("MachineDeployment %s lost the finalizer upstream uses: %v %v", md.Name, err, cur.Finalizers)
		}
	}
	again, err := migrate.NewPlan(ctx, c, migrate.Options{})
	if err != nil || len(again.Actions) != 0 {
		t.Errorf("a second run would change: %v %v", again.Actions, err)
	}
	return mds
}

// snapshot lists the names and resourceVersions of every Secret, Role, RoleBinding and OSC, to tell whether
// anything changed.
func snapshot(t *testing.T, c client.Client) []string {
	t.Helper()
	var out []string
	for _, l := range []client.ObjectList{&corev1.SecretList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &osmv1alpha1.OperatingSystemConfigList{}, &corev1.ServiceAccountList{}} {
		if err := c.List(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		items, _ := metaItems(l)
		out = append(out, items...)
	}
	slices.Sort(out)
	return out
}

func metaItems(l client.ObjectList) ([]string, error) {
	objs, err := meta.ExtractList(l)
	var out []string
	for _, o := range objs {
		m, merr := meta.Accessor(o)
		if merr != nil {
			return nil, merr
		}
		out = append(out, fmt.Sprintf("%T %s/%s@%s", o, m.GetNamespace(), m.GetName(), m.GetResourceVersion()))
	}
	return out, err
}

// fillGetterTokens plays kube-controller-manager's token controller, which a bare control plane lacks: it fills
// the service-account-token Secret of cloud-init-getter with a token of that ServiceAccount, until the test ends.
func fillGetterTokens(t *testing.T, env *testenv.Env) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		_ = kwait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			s, err := cs.CoreV1().Secrets(userDataNS).Get(ctx, "cloud-init-getter-token", metav1.GetOptions{})
			if err != nil || len(s.Data["token"]) > 0 || s.Type != corev1.SecretTypeServiceAccountToken {
				return false, nil
			}
			tr, err := cs.CoreV1().ServiceAccounts(userDataNS).CreateToken(ctx, s.Annotations[corev1.ServiceAccountNameKey], &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			if err != nil {
				return false, nil
			}
			s.Data = map[string][]byte{"token": []byte(tr.Status.Token), "namespace": []byte(userDataNS), "ca.crt": env.Config.CAData}
			_, err = cs.CoreV1().Secrets(userDataNS).Update(ctx, s, metav1.UpdateOptions{})
			return err == nil, nil
		})
	}()
}

// impersonatingKubeconfig writes env's admin kubeconfig acting as user.
func impersonatingKubeconfig(t *testing.T, env *testenv.Env, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "as.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
