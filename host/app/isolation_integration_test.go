package app_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
)

// TestNameCollisions replays the name-collision attacks against the real API server: MachineDeployments whose
// machine-controller Secret names coincide (c/a-b and b-c/a both map to "a-b-c-...-config"), and names longer
// than a label value (which earlier releases cut at 63 characters, so deleting one MachineDeployment revoked
// another's credentials). Containment: the first MachineDeployment keeps its Secrets and credentials; the
// second gets a condition and an event naming the first, and nothing is written or shared; every node
// credential reads only its own provisioning data; deleting one MachineDeployment leaves the others' intact.
func TestNameCollisions(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	for _, ns := range []string{"c", "b-c", "long"} {
		ensureNamespace(t, env, ns)
	}
	clusterInfo(t, env)
	startOSM(t, env, nil, app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true, WorkerCount: 4})
	if err := c.Create(ctx, testOSP("osp-testos", "v1.0.0")); err != nil {
		t.Fatal(err)
	}

	first := isoMD(t, "c", "a-b")
	second := isoMD(t, "b-c", "a")
	if render.BootstrapSecretName(first) != render.BootstrapSecretName(second) {
		t.Fatalf("the test needs colliding Secret names, got %s and %s", render.BootstrapSecretName(first), render.BootstrapSecretName(second))
	}

	t.Run("the second of two colliding MachineDeployments is reported and shares nothing", func(t *testing.T) {
		if err := c.Create(ctx, first); err != nil {
			t.Fatal(err)
		}
		boot := waitForSecret(t, c, "a-b-c-bootstrap-config", "1")
		prov := waitForSecret(t, c, "a-b-c-provisioning-config", "1")
		if credentials.Owner(boot) != "c/a-b" || credentials.Owner(prov) != "c/a-b" {
			t.Fatalf("owners: %q %q", credentials.Owner(boot), credentials.Owner(prov))
		}

		if err := c.Create(ctx, second); err != nil {
			t.Fatal(err)
		}
		waitForNotReady(t, c, render.OSCName(second), osmv1alpha1.ReasonSecretNameConflict, "c/a-b", "a-b-c-")
		isoWaitForEvent(t, c, second, osmv1alpha1.ReasonSecretNameConflict, "c/a-b")

		// Nothing of the first was touched, and the second holds no credential: one would be allowed to read
		// the first's provisioning Secret, which has the name its Role would grant.
		for _, s := range []*corev1.Secret{boot, prov} {
			now := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(s), now); err != nil {
				t.Fatal(err)
			}
			if now.ResourceVersion != s.ResourceVersion || credentials.Owner(now) != "c/a-b" {
				t.Errorf("%s was written after the second MachineDeployment appeared (owner %q)", s.Name, credentials.Owner(now))
			}
		}
		if n := isoCredentialObjects(t, c, second); n != 0 {
			t.Errorf("b-c/a holds %d credential objects, want none", n)
		}
		if oscs := isoCount(t, c, &osmv1alpha1.OperatingSystemConfigList{}, osmNamespace, first); oscs != 1 {
			t.Errorf("c/a-b has %d OperatingSystemConfigs, want its own one", oscs)
		}

		// The first's node credential reads its own provisioning data.
		node := nodeClient(t, env, string(boot.Data[osc.KeyProvisioningToken]))
		if err := node.Get(ctx, client.ObjectKeyFromObject(prov), &corev1.Secret{}); err != nil {
			t.Fatalf("c/a-b's node cannot read its provisioning Secret: %v", err)
		}
	})

	t.Run("deleting the second leaves the first's Secrets and credentials", func(t *testing.T) {
		boot := waitForSecret(t, c, "a-b-c-bootstrap-config", "1")
		isoDelete(t, c, second)
		node := nodeClient(t, env, string(boot.Data[osc.KeyProvisioningToken]))
		if err := node.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "a-b-c-provisioning-config"}, &corev1.Secret{}); err != nil {
			t.Fatalf("after deleting b-c/a, c/a-b's node cannot read its provisioning Secret: %v", err)
		}
		if n := isoCredentialObjects(t, c, first); n != 3 {
			t.Errorf("c/a-b has %d credential objects after b-c/a was deleted, want 3 (token, Role, RoleBinding)", n)
		}
		bootstrapTokenOf(t, c, first)
	})

	t.Run("when the owner goes, the waiting MachineDeployment takes the names over with its own credential", func(t *testing.T) {
		oldBoot := waitForSecret(t, c, "a-b-c-bootstrap-config", "1")
		again := isoMD(t, "b-c", "a")
		if err := c.Create(ctx, again); err != nil {
			t.Fatal(err)
		}
		isoWaitForEvent(t, c, again, osmv1alpha1.ReasonSecretNameConflict, "c/a-b")
		isoDelete(t, c, first)
		// Well before the conflict's retry (10 minutes): the Secret's deletion brings b-c/a back.
		boot := &corev1.Secret{}
		eventually(t, wait, "b-c/a owns a-b-c-bootstrap-config", func() error {
			boot = waitForSecret(t, c, "a-b-c-bootstrap-config", "1")
			if o := credentials.Owner(boot); o != "b-c/a" {
				return fmt.Errorf("owner %q", o)
			}
			return nil
		})
		prov := waitForSecret(t, c, "a-b-c-provisioning-config", "1")
		if credentials.Owner(prov) != "b-c/a" {
			t.Errorf("provisioning Secret owner %q", credentials.Owner(prov))
		}
		node := nodeClient(t, env, string(boot.Data[osc.KeyProvisioningToken]))
		if err := node.Get(ctx, client.ObjectKeyFromObject(prov), &corev1.Secret{}); err != nil {
			t.Fatalf("b-c/a's node cannot read its provisioning Secret: %v", err)
		}
		// The previous owner's credential was revoked with it and does not read the new owner's data.
		gone := nodeClient(t, env, string(oldBoot.Data[osc.KeyProvisioningToken]))
		if err := gone.Get(ctx, client.ObjectKeyFromObject(prov), &corev1.Secret{}); !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) {
			t.Errorf("c/a-b's old credential reading b-c/a's provisioning Secret: want 401 or 403, got %v", err)
		}
	})

	long := strings.Repeat("n", 70)
	one, two := isoMD(t, "long", long+"-one"), isoMD(t, "long", long+"-two")

	t.Run("names past 63 characters share no credential", func(t *testing.T) {
		for _, md := range []*clusterv1alpha1.MachineDeployment{one, two} {
			if err := c.Create(ctx, md); err != nil {
				t.Fatal(err)
			}
		}
		bootOne := waitForSecret(t, c, render.BootstrapSecretName(one), "1")
		bootTwo := waitForSecret(t, c, render.BootstrapSecretName(two), "1")
		if bootstrapTokenOf(t, c, one) == bootstrapTokenOf(t, c, two) {
			t.Error("the two MachineDeployments share a bootstrap token")
		}
		for _, tc := range []struct {
			boot       *corev1.Secret
			own, other *clusterv1alpha1.MachineDeployment
		}{{bootOne, one, two}, {bootTwo, two, one}} {
			node := nodeClient(t, env, string(tc.boot.Data[osc.KeyProvisioningToken]))
			if err := node.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: render.ProvisioningSecretName(tc.own)}, &corev1.Secret{}); err != nil {
				t.Errorf("%s cannot read its own provisioning Secret: %v", tc.own.Name, err)
			}
			for _, name := range []string{render.ProvisioningSecretName(tc.other), render.KubeletBootstrapSecretName(tc.other)} {
				if err := node.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: name}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
					t.Errorf("%s's node reading %s: want 403, got %v", tc.own.Name, name, err)
				}
			}
		}
	})

	t.Run("deleting one long-named MachineDeployment leaves the other's credentials", func(t *testing.T) {
		bootTwo := waitForSecret(t, c, render.BootstrapSecretName(two), "1")
		tokenTwo := bootstrapTokenOf(t, c, two)
		isoDelete(t, c, one)
		if n := isoCredentialObjects(t, c, one); n != 0 {
			t.Errorf("%d credential objects of the deleted MachineDeployment left", n)
		}
		node := nodeClient(t, env, string(bootTwo.Data[osc.KeyProvisioningToken]))
		if err := node.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: render.ProvisioningSecretName(two)}, &corev1.Secret{}); err != nil {
			t.Fatalf("the other MachineDeployment's node lost access: %v", err)
		}
		if got := bootstrapTokenOf(t, c, two); got != tokenTwo {
			t.Errorf("the other MachineDeployment's bootstrap token changed")
		}
		for _, name := range []string{render.BootstrapSecretName(two), render.ProvisioningSecretName(two)} {
			if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: name}, &corev1.Secret{}); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
}

// isoMD is a testos MachineDeployment in namespace ns.
func isoMD(t *testing.T, ns, name string) *clusterv1alpha1.MachineDeployment {
	md := newMD(t, name, "testos", "aws", "osp-testos")
	md.Namespace = ns
	return md
}

// isoCredentialObjects counts md's bootstrap tokens, Roles and RoleBindings, and ServiceAccounts (which OSM no
// longer issues, so one is a regression).
func isoCredentialObjects(t *testing.T, c client.Client, md *clusterv1alpha1.MachineDeployment) int {
	t.Helper()
	return isoCount(t, c, &corev1.SecretList{}, "kube-system", md) +
		isoCount(t, c, &corev1.ServiceAccountList{}, userDataNS, md) +
		isoCount(t, c, &rbacv1.RoleList{}, userDataNS, md) +
		isoCount(t, c, &rbacv1.RoleBindingList{}, userDataNS, md)
}

func isoCount(t *testing.T, c client.Client, list client.ObjectList, ns string, md *clusterv1alpha1.MachineDeployment) int {
	t.Helper()
	if err := c.List(context.Background(), list, client.InNamespace(ns), credentials.Selector(md)); err != nil {
		t.Fatal(err)
	}
	return meta.LenList(list)
}

// isoDelete deletes md and waits until the controller has released it.
func isoDelete(t *testing.T, c client.Client, md *clusterv1alpha1.MachineDeployment) {
	t.Helper()
	if err := c.Delete(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, md.Namespace+"/"+md.Name+" gone", func() error {
		got := &clusterv1alpha1.MachineDeployment{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(md), got); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (finalizers %v): %w", got.Finalizers, err)
		}
		return nil
	})
}

// isoWaitForEvent waits for a Warning event on md with reason whose message contains want.
func isoWaitForEvent(t *testing.T, c client.Client, md *clusterv1alpha1.MachineDeployment, reason, want string) {
	t.Helper()
	eventually(t, wait, "event "+reason+" on "+md.Name, func() error {
		events := &corev1.EventList{}
		if err := c.List(context.Background(), events, client.InNamespace(md.Namespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == md.Name && e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, want) {
				return nil
			}
		}
		return fmt.Errorf("no %s event naming %s among %d events", reason, want, len(events.Items))
	})
}

// TestInvalidMachineDeploymentFields creates MachineDeployments with an absurd kubelet version and an image GC
// percentage over 100 next to a valid one: each invalid one gets InvalidMachineDeployment on its OSC and a
// Warning event naming the field, and no user-data; the valid one renders; fixing the field renders.
func TestInvalidMachineDeploymentFields(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	startOSM(t, env, nil, app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true, WorkerCount: 4})
	if err := c.Create(ctx, testOSP("osp-testos", "v1.0.0")); err != nil {
		t.Fatal(err)
	}
	badVersion := newMD(t, "bad-version", "testos", "aws", "osp-testos")
	badVersion.Spec.Template.Spec.Versions.Kubelet = "1.9999.0"
	badGC := newMD(t, "bad-gc", "testos", "aws", "osp-testos")
	badGC.Annotations[clusterv1alpha1.AnnotationKubeletConfigPrefix+render.KubeletImageGCHighThresholdPercent] = "150"
	for _, md := range []*clusterv1alpha1.MachineDeployment{badVersion, badGC, newMD(t, "good", "testos", "aws", "osp-testos")} {
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
	}
	waitForSecret(t, c, "good-kube-system-bootstrap-config", "1")
	for md, field := range map[*clusterv1alpha1.MachineDeployment]string{badVersion: "versions.kubelet 1.9999.0", badGC: "ImageGCHighThresholdPercent 150"} {
		got := &osmv1alpha1.OperatingSystemConfig{}
		eventually(t, wait, md.Name+" reports the invalid field", func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(md)}, got); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, osmv1alpha1.ConditionReady)
			if cond == nil || cond.Reason != osmv1alpha1.ReasonInvalidMachineDeployment || !strings.Contains(cond.Message, field) {
				return fmt.Errorf("Ready condition = %+v", cond)
			}
			return nil
		})
		isoWaitForEvent(t, c, md, osmv1alpha1.ReasonInvalidMachineDeployment, field)
		if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: render.BootstrapSecretName(md)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: user-data written for an invalid MachineDeployment (err=%v)", md.Name, err)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(badVersion), badVersion); err != nil {
		t.Fatal(err)
	}
	badVersion.Spec.Template.Spec.Versions.Kubelet = "1.33.2"
	if err := c.Update(ctx, badVersion); err != nil {
		t.Fatal(err)
	}
	waitForSecret(t, c, "bad-version-kube-system-bootstrap-config", "1")
}
