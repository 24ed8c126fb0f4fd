// Package render turns one MachineDeployment and its OperatingSystemProfile into an OperatingSystemConfig and
// the user-data of its two Secrets. It is what the OSC reconciler, profile validation (admission and `osmctl lint` trial renders) and
// `osmctl render` share, so that what an operator previews offline is byte for byte what the controller writes.
//
// A render (Renderer.Render) is a fixed sequence, each step in its own file:
//
//   - input.go, kubeletconfig.go, flags.go, settings.go: the render context, from the MachineDeployment, its
//     kubelet annotations, the controller's flags and the cluster's facts;
//   - tenancy.go: whether the MachineDeployment's namespace may use the profile at all;
//   - extensions.go, templatedata.go, osconfig.go: the profile with its extensions applied, and the template
//     data under upstream's field names;
//   - pipeline.go, plugin.go: per stage, the templates, then the profile's plugin (and any extension plugins),
//     each call on a sandbox instance of its own;
//   - identity.go, secrets.go, redact.go: what plugins see. Plugins and the OSC get placeholders for every
//     credential and MachineDeployment name; the real values are substituted only into the user-data
//     (Output.UserData), which leaves the process only as a Secret;
//   - userdata.go: the encoders (cloud-init, Ignition, or the plugin's own osm_encode) and the size bounds.
//
// Errors carry a condition reason and whether a retry can help (errors.go), which the reconciler maps to its
// conditions. The package holds no client: reading the cluster and writing the results is the reconciler's job.
package render
