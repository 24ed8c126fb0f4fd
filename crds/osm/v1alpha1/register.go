package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the OSM API.
	GroupVersion = schema.GroupVersion{Group: "operatingsystemmanager.k8c.io", Version: "v1alpha1"}

	// SchemeBuilder registers the OSM kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the OSM kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(
		&OperatingSystemProfile{}, &OperatingSystemProfileList{},
		&OperatingSystemConfig{}, &OperatingSystemConfigList{},
	)
}
