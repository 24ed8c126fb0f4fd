// Package node holds everything the default OS plugins have in common: the plugin config schema, the
// bootstrap stage (fetch the provisioning configuration over TLS verified with the cluster CA and hand it to
// the provisioning utility), the provisioning stage (kernel, containerd, CNI, cri-tools, kubelet, health
// monitor, proxy, CA trust) and the merge with the profile's template output.
//
// An OS plugin describes only what differs on its distribution in an OS value (package manager, trust store,
// firewall, static network style, provider quirks) and registers node.New(os) with the guest package. All of
// it is plain Go without dependencies beyond the SDK's abi package, so it runs natively in tests and,
// unchanged, inside the controller's WebAssembly sandbox; keeping it dependency-free also keeps the modules
// small, which matters because the controller compiles them at start-up.
//
// Everything a node runs is a shell script or a systemd unit generated here. Values from the render context
// that end up in a script are shell-quoted (Quote), and structured files (kubelet configuration, kubeconfig,
// netplan) are built as data and marshalled as JSON, which is valid YAML, never assembled from text.
package node
