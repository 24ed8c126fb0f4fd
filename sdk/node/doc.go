// Package node is the kit for Linux node plugins: everything a machine needs to join a Kubernetes cluster,
// driven by an OS description of what differs between distributions. The default OS plugins (Ubuntu, Debian,
// Flatcar, RHEL, Rocky Linux, Amazon Linux) are built on it and nothing else, so a vendor plugin can do all
// they do.
//
// # A plugin in a few lines
//
// Describe the distribution in an OS value and register node.New(os) from the plugin's init (see the
// example of New). The apt and dnf subpackages describe the Debian and Red Hat families (cloud-init), the
// ignition subpackage the image-based OSes provisioned by Ignition (Flatcar, Fedora CoreOS); each lists what
// it assumes in its package documentation and makes each assumption a field. A distribution of another
// family fills in the hooks itself (sdk/examples/opensuse does so for zypper in about 120 lines).
//
// # Building blocks
//
// Plugin.Render calls these in order; a plugin with its own Render calls them directly after NewRequest:
//
//   - Bootstrap: the bootstrap stage. It writes the cluster CA and osm-bootstrap, a script run by a unit that
//     fetches the provisioning Secret with the provisioning token over TLS verified with the cluster CA
//     (FetchProvisioningConfig) and hands it to the provisioning utility (OS.Handoff; CloudInitHandoff for
//     cloud-init, which places --file for cloud-init before and after 24.1; IgnitionHandoff for Ignition, with
//     the FlatcarIgnition and FedoraCoreOSIgnition shapes). See sdk/SPEC.md §9, the boot contract.
//   - Provisioning: the plugin's own provisioning configuration: kubelet (KubeletConfig and KubeletFlags by
//     Kubernetes version, KubeletService, BootstrapKubeconfig), containerd with the host's config.toml and
//     hosts.toml files, crictl, kernel modules and sysctls, journald, proxy (ProxyVars) and CA trust
//     (OS.Trust), the node IP and name helper (NodeEnvScript) and the health monitor (HealthScript,
//     HealthUnits).
//   - Merge: the profile's template output applied on top of the plugin's configuration.
//   - FinishProvisioning: osm-setup, the script that provisions the machine once: OS.Prepare, DownloadHelper
//     (a `download` shell function that verifies each file with its published SHA-256), OS.Install (packages,
//     containerd), Binaries (CNI plugins, cri-tools and the Kubernetes binaries, from mirror base URLs), then
//     it enables and starts the units and runs the profile's runcmd, which cloud-init's init stage skips.
//
// Scripts are built with Script; every value from the render context that ends up in a script is quoted
// with Quote. Paths and unit names on the node are the constants of paths.go; they are part of the node's
// interface for operators and stay stable.
//
// # Configuration
//
// CommonOptions are the keys every plugin built on the kit accepts (CNI and cri-tools versions and mirrors,
// journald size); OS.Options adds the distribution's. Options carry a check that runs at admission time
// (Plugin.Validate) and before every render.
//
// All of it is plain Go without dependencies beyond the SDK's abi package, so it runs natively in tests and,
// unchanged, inside the controller's WebAssembly sandbox; keeping it dependency-free also keeps the modules
// small, which matters because the controller compiles them at start-up. Structured files (kubelet
// configuration, kubeconfig) are built as data and marshalled as JSON, which is valid YAML.
package node
