// Package v1alpha1 holds the operatingsystemmanager.k8c.io/v1alpha1 API: OperatingSystemProfile and
// OperatingSystemConfig.
//
// Every field upstream Kubermatic OSM defines keeps its name, type and meaning so that existing profiles apply
// unchanged. Fields OSM adds on top (spec.plugin, status) are optional.
//
// +kubebuilder:object:generate=true
// +groupName=operatingsystemmanager.k8c.io
package v1alpha1
