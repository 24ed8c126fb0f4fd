// Package clusterinfo finds what a joining node needs to know about the cluster: the API server URL and the CA
// that signs its certificate.
//
// The kubeadm convention is the kube-public/cluster-info ConfigMap, which holds a kubeconfig readable without
// credentials. Clusters without it (managed control planes) fall back to the endpoints of the default/kubernetes
// Service, read from its EndpointSlice, and the CA of the controller's own connection to the cluster.
package clusterinfo

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/osmhq/osm/host/render"
)

// Get reads the cluster's API server URL and CA. fallbackCA is used when cluster-info is absent: the CA the
// controller itself trusts for this cluster.
func Get(ctx context.Context, c client.Reader, fallbackCA []byte) (render.ClusterInfo, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: "kube-public", Name: "cluster-info"}, cm)
	switch {
	case err == nil:
		return fromKubeconfig(cm.Data["kubeconfig"])
	case !apierrors.IsNotFound(err):
		return render.ClusterInfo{}, fmt.Errorf("reading kube-public/cluster-info: %w", err)
	}
	url, err := fromEndpointSlice(ctx, c)
	if err != nil {
		return render.ClusterInfo{}, err
	}
	if len(fallbackCA) == 0 {
		return render.ClusterInfo{}, fmt.Errorf("kube-public/cluster-info does not exist and the controller's connection has no CA; set -kubernetes-ca-bundle")
	}
	return render.ClusterInfo{ServerURL: url, CACert: string(fallbackCA)}, nil
}

func fromKubeconfig(data string) (render.ClusterInfo, error) {
	if data == "" {
		return render.ClusterInfo{}, fmt.Errorf("kube-public/cluster-info has no kubeconfig key")
	}
	cfg, err := clientcmd.Load([]byte(data))
	if err != nil {
		return render.ClusterInfo{}, fmt.Errorf("kube-public/cluster-info: %w", err)
	}
	if len(cfg.Clusters) != 1 {
		return render.ClusterInfo{}, fmt.Errorf("kube-public/cluster-info holds %d clusters, want 1", len(cfg.Clusters))
	}
	for _, cl := range cfg.Clusters {
		if cl.Server == "" || len(cl.CertificateAuthorityData) == 0 {
			return render.ClusterInfo{}, fmt.Errorf("kube-public/cluster-info lacks the server or its CA")
		}
		// Profiles and plugins append paths ("/api/v1/…") to the URL; a server written with a trailing slash
		// would give them "//api", which the API server does not route.
		return render.ClusterInfo{ServerURL: strings.TrimRight(cl.Server, "/"), CACert: string(cl.CertificateAuthorityData)}, nil
	}
	panic("unreachable")
}

func fromEndpointSlice(ctx context.Context, c client.Reader) (string, error) {
	slices := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, slices, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return "", fmt.Errorf("kube-public/cluster-info does not exist and listing the kubernetes EndpointSlices failed: %w", err)
	}
	for _, s := range slices.Items {
		port := int32(443)
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == "https" && p.Port != nil {
				port = *p.Port
			}
		}
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) > 0 && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				return "https://" + net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port))), nil
			}
		}
	}
	return "", fmt.Errorf("kube-public/cluster-info does not exist and the kubernetes Service has no ready endpoint")
}
