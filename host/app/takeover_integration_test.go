package app_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins"
)

// TestKubeletSecretOfReplacedProfileRemoved is the takeover race of upstream's default profiles, in the order
// that left orphans: a MachineDeployment rendered from upstream's templates-only osp-ubuntu, which fetches the
// kubelet bootstrap kubeconfig from its own Secret "<md>.<ns>-kubelet-bootstrap-config", before the profile
// is replaced by OSM's (here the controller runs with -disable-default-osps, and the test replaces the profile
// as the takeover does). Once OSM's plugin profile renders the MachineDeployment, whose user-data carries the
// kubeconfig itself, that Secret, which holds a bootstrap token, must be gone.
func TestKubeletSecretOfReplacedProfileRemoved(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	applyAll(t, env, upstreamDocs(t, filepath.Join("osps", "osp-ubuntu.yaml")))
	md := newMD(t, "raced", "ubuntu", "aws", "osp-ubuntu")
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	startOSM(t, env, nil, app.Options{Builtins: plugins.Builtin(), DisableDefaultOSPs: true})

	kubelet := client.ObjectKey{Namespace: userDataNS, Name: render.KubeletBootstrapSecretName(md)}
	eventually(t, wait, "rendered from upstream's profile, with its kubelet bootstrap Secret", func() error {
		return c.Get(ctx, kubelet, &corev1.Secret{})
	})

	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	var shipped *osmv1alpha1.OperatingSystemProfile
	for _, d := range defaults {
		if d.Name == "osp-ubuntu" {
			shipped = d
		}
	}
	cur := &osmv1alpha1.OperatingSystemProfile{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "osp-ubuntu"}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec = *shipped.Spec.DeepCopy()
	if err := c.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}

	eventually(t, wait, "rendered from OSM's profile, the kubelet bootstrap Secret gone", func() error {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: render.BootstrapSecretName(md)}, s); err != nil {
			return err
		}
		if s.Annotations[osc.AnnotationOSPVersion] != shipped.Spec.Version {
			return fmt.Errorf("bootstrap Secret rendered from profile version %q", s.Annotations[osc.AnnotationOSPVersion])
		}
		if err := c.Get(ctx, kubelet, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Secret %s still there (%w)", kubelet.Name, err)
		}
		return nil
	})
}
