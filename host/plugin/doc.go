// Package plugin is the controller's plugin manager. It resolves an OperatingSystemProfile's plugin reference
// — a built-in plugin embedded in the controller or an OCI artifact pinned by digest — to a loaded, validated
// module in the sandbox of sdk/runtime, caches it by digest, and wires the runtime's hooks to Prometheus
// metrics and the controller's structured log.
//
// Loading is the expensive part (a cold compile takes seconds, a load from the disk cache a tenth of one); a
// Manager does it once per digest per process and answers later resolutions from memory.
package plugin
