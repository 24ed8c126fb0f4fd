package app

import (
	"context"
	"encoding/json"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/scheme"
)

// metadataAnswerClient is a client with one difference: it creates and updates OperatingSystemConfigs and
// Secrets asking the API server to answer with the object's metadata alone (Accept: PartialObjectMetadata),
// which it copies into the object sent. The full answer would be the rendered object just sent: 20–40 KiB of
// user-data or configuration per write, three or four writes per MachineDeployment, that the API server
// encodes and the controller reads and decodes, for nothing (the reconciler keeps what it sent). Errors come
// back as Status objects as before, so AlreadyExists, Conflict and the rest keep their meaning.
type metadataAnswerClient struct {
	client.Client
	rest map[schema.GroupVersionKind]rest.Interface
}

// metadataOnly is the Accept header of a write that wants metadata back.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// answeredWithMetadata are the kinds whose writes metadataAnswerClient answers with metadata, by resource.
var answeredWithMetadata = map[schema.GroupVersionKind]string{
	osmv1alpha1.GroupVersion.WithKind("OperatingSystemConfig"): "operatingsystemconfigs",
	corev1.SchemeGroupVersion.WithKind("Secret"):               "secrets",
}

func newMetadataAnswerClient(c client.Client, cfg *rest.Config, hc *http.Client) (client.Client, error) {
	m := metadataAnswerClient{Client: c, rest: map[schema.GroupVersionKind]rest.Interface{}}
	for gvk := range answeredWithMetadata {
		rc, err := apiutil.RESTClientForGVK(gvk, false, false, cfg, serializer.NewCodecFactory(scheme.Scheme), hc)
		if err != nil {
			return nil, err
		}
		m.rest[gvk] = rc
	}
	return m, nil
}

// kindOf is obj's kind when its writes are answered with metadata.
func kindOf(obj client.Object) (schema.GroupVersionKind, bool) {
	switch obj.(type) {
	case *osmv1alpha1.OperatingSystemConfig:
		return osmv1alpha1.GroupVersion.WithKind("OperatingSystemConfig"), true
	case *corev1.Secret:
		return corev1.SchemeGroupVersion.WithKind("Secret"), true
	}
	return schema.GroupVersionKind{}, false
}

func (c metadataAnswerClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	gvk, ok := kindOf(obj)
	if !ok || len(opts) > 0 {
		return c.Client.Create(ctx, obj, opts...)
	}
	req := c.rest[gvk].Post().Namespace(obj.GetNamespace()).Resource(answeredWithMetadata[gvk]).Body(obj)
	return answerInto(ctx, req, obj)
}

func (c metadataAnswerClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	gvk, ok := kindOf(obj)
	if !ok || len(opts) > 0 {
		return c.Client.Update(ctx, obj, opts...)
	}
	req := c.rest[gvk].Put().Namespace(obj.GetNamespace()).Resource(answeredWithMetadata[gvk]).Name(obj.GetName()).Body(obj)
	return answerInto(ctx, req, obj)
}

// answerInto sends req asking for metadata back, and copies what the API server set into obj.
func answerInto(ctx context.Context, req *rest.Request, obj client.Object) error {
	res := req.SetHeader("Accept", metadataOnly).Do(ctx)
	if err := res.Error(); err != nil {
		return err // the Status the API server answered, decoded
	}
	raw, err := res.Raw()
	if err != nil {
		return err
	}
	var meta metav1.PartialObjectMetadata
	if err := json.Unmarshal(raw, &meta); err != nil {
		return err
	}
	obj.SetUID(meta.UID)
	obj.SetResourceVersion(meta.ResourceVersion)
	obj.SetGeneration(meta.Generation)
	obj.SetCreationTimestamp(meta.CreationTimestamp)
	obj.SetManagedFields(meta.ManagedFields)
	return nil
}
