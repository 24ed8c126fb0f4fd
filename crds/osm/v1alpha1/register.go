package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the OSM API.
	GroupVersion = schema.GroupVersion{Group: "operatingsystemmanager.k8c.io", Version: "v1alpha1"}

	// SchemeBuilder registers the OSM kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the OSM kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &OperatingSystemProfile{}, &OperatingSystemProfileList{},
		&OperatingSystemConfig{}, &OperatingSystemConfigList{},
		&OperatingSystemProfileExtension{}, &OperatingSystemProfileExtensionList{},
		&OperatingSystemNodeReport{}, &OperatingSystemNodeReportList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
