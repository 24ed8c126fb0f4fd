// Package v1alpha1 holds the subset of machine-controller's cluster.k8s.io/v1alpha1 API that OSM reads.
//
// machine-controller's own Go module is not available to us, so the types are defined here, field for field
// compatible with what machine-controller writes. Fields OSM does not read are either typed loosely or
// preserved as unknown fields, so a round trip through these types loses nothing that OSM writes back (OSM only
// ever writes annotations and finalizers to a MachineDeployment).
//
// +kubebuilder:object:generate=true
// +groupName=cluster.k8s.io
package v1alpha1
