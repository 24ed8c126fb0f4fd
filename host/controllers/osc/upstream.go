package osc

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
)

// Upstream OSM v1.x leaves objects behind that OSM names differently and does not use: the
// OperatingSystemConfig "<md>-<namespace>-config" in -namespace, and the kubelet bootstrap kubeconfig Secret
// "<namespace>-<md>-kubelet-bootstrap-config" (or "<md>-kubelet-bootstrap-config" when "<namespace>-<md>" is
// 63 characters or longer) in the user-data namespace, which holds a bootstrap token's credentials. Once OSM
// has written a MachineDeployment's own user-data, it removes them. The names can be those of another
// MachineDeployment's objects of OSM (MachineDeployment names may contain dots), so an object carrying OSM's
// marks (the render hash annotation, a MachineDeployment label) is never removed.

// UpstreamOSCName and UpstreamKubeletSecretName are upstream OSM's names for md's objects.
func UpstreamOSCName(md *clusterv1alpha1.MachineDeployment) string {
	return fmt.Sprintf("%s-%s-config", md.Name, md.Namespace)
}

func UpstreamKubeletSecretName(md *clusterv1alpha1.MachineDeployment) string {
	key := md.Namespace + "-" + md.Name
	if len(key) >= 63 {
		key = md.Name
	}
	return key + "-kubelet-bootstrap-config"
}

// removeUpstreamLeftovers removes md's upstream leftovers, once per MachineDeployment and process.
func (r *Reconciler) removeUpstreamLeftovers(ctx context.Context, md *clusterv1alpha1.MachineDeployment) {
	if _, done := r.upstreamChecked.Load(md.UID); done {
		return
	}
	log := logr.FromContextOrDiscard(ctx)
	osc := OSCMeta()
	err := r.Mgmt.Get(ctx, client.ObjectKey{Namespace: r.Settings.Namespace, Name: UpstreamOSCName(md)}, osc)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		log.Error(err, "looking for upstream OSM's OperatingSystemConfig")
		return
	case !markedByOSM(osc):
		if err := r.Mgmt.Delete(ctx, osc, client.Preconditions{UID: &osc.UID}); client.IgnoreNotFound(err) != nil {
			log.Error(err, "removing upstream OSM's OperatingSystemConfig", "name", osc.Name)
			return
		}
		log.Info("removed upstream OSM's OperatingSystemConfig", "name", osc.Name)
	}
	// The user-data namespace is cached whole, so the Secret is read from the cache.
	sec := &corev1.Secret{}
	err = r.Worker.Get(ctx, client.ObjectKey{Namespace: r.Settings.CloudInitSettingsNamespace, Name: UpstreamKubeletSecretName(md)}, sec)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		log.Error(err, "looking for upstream OSM's kubelet bootstrap Secret")
		return
	case !markedByOSM(sec):
		if err := r.Worker.Delete(ctx, sec, client.Preconditions{UID: &sec.UID}); client.IgnoreNotFound(err) != nil {
			log.Error(err, "removing upstream OSM's kubelet bootstrap Secret", "name", sec.Name)
			return
		}
		log.Info("removed upstream OSM's kubelet bootstrap Secret", "name", sec.Name)
	}
	r.upstreamChecked.Store(md.UID, true)
}

func markedByOSM(o metav1.Object) bool {
	if _, ok := o.GetAnnotations()[AnnotationRenderHash]; ok {
		return true
	}
	_, ok := o.GetLabels()[credentials.LabelMachineDeployment]
	return ok
}
