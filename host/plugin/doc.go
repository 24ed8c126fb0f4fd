// Package plugin is "the plugin" to the controller: it resolves an OperatingSystemProfile's plugin reference —
// a built-in plugin embedded in the controller or an OCI artifact pinned by digest — to a *Plugin the render
// pipeline calls (Resolver implements render.PluginSource; *Plugin implements render.Plugin), and reports
// every failure as a *render.Error whose condition reason and retry decision come from one table
// (errors.go), which the reconcilers' failure taxonomy (host/controllers/internal/failure) reads.
//
// The controller holds no compiled code and runs no guest code. A Manager hands modules to the plugin host
// supervisor (package pluginhost): a tenant's module is compiled by a compile process that runs none of its
// code and runs in a host process of its own, one per module digest; the built-in modules run in one
// trusted host, from the machine code the image ships (make plugins precompiles it). Every request goes
// through one function (send in plugin.go): encoded as the ABI's JSON, answered from the output memo
// (memo.go) when an identical request of the same module was answered before, else sent to the module's
// host, decoded and checked.
//
// A Manager remembers what each module declared, so Identify names a profile's plugin for status and render
// hashes without a pull or a load. What is loaded where is the supervisor's alone (its hosts, and the
// modules each loaded): idle hosts stop and the built-in host forgets idle modules, which load again on the
// next call the memo cannot answer; a load failure that retrying will not fix is remembered there too.
package plugin
