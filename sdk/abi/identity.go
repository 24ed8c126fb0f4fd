package abi

// IdentityPlaceholders stand in a render request for what tells one MachineDeployment from its neighbours: its
// name, namespace and revision, in RenderContext.MachineDeployment and in Cluster.ProvisioningSecret.Name
// ("<name>-<namespace>-provisioning-config"). Like the credential placeholders (SecretPlaceholders), a plugin
// copies them into its output as they are, and the host puts the real values into the configuration the
// plugin returns. Requests then differ only where configurations do, and the host renders each distinct
// configuration once however many MachineDeployments share it.
//
// A plugin that computes on these values (cuts, hashes or compares a name) rather than only copying them
// declares Metadata.RealIdentity and is handed the real values. The host hands the real value too where it
// could not be substituted safely: a value that is not a DNS name (lower case letters, digits, '-' and '.').
var IdentityPlaceholders = ObjectRef{
	Name:      "__OSM_MD_NAME__",
	Namespace: "__OSM_MD_NAMESPACE__",
	Revision:  "__OSM_MD_REVISION__",
}
