// Package plugintest is the test harness for plugin authors.
//
// A plugin package tests its logic natively and as the WebAssembly module the controller runs, with the same
// fixtures:
//
//	func TestFixtures(t *testing.T) {
//		plugintest.RunFixtures(t, "testdata", plugintest.Native(myPlugin{}))
//	}
//
//	func TestFixturesWasm(t *testing.T) {
//		m := plugintest.Load(t, plugintest.Build(t, "."))
//		plugintest.RunFixtures(t, "testdata", plugintest.Wasm(m))
//	}
//
// A fixture is testdata/<case>.request.json (an abi.RenderRequest) with either <case>.response.txt (the
// expected response in the review format of Format: each file's content as text, scripts as scripts),
// <case>.response.json (the expected abi.RenderResponse as JSON, kept for existing fixtures) or
// <case>.error.txt (text the error must contain). `go test -update` rewrites the response files from what the
// plugin returns.
//
// Beyond comparing with golden files, Check runs what catches a plugin that passes every schema but fails a
// node: the bootstrap really fetches the provisioning configuration, is started, writes its done marker and
// hands it off to the request's provisioning utility (CheckBootstrap),
// credential placeholders reach files verbatim (CheckPlaceholders), paths and permissions are valid
// (CheckFiles), the output is deterministic (CheckDeterministic), every script parses (CheckScripts), and the
// generated scripts run in a Sandbox (stubbed commands, paths under a temporary root): the bootstrap fetches
// from a stubbed API server and hands the configuration off (CheckBootstrapRun), and osm-node-env, with the
// OS.Hostname hook, succeeds with and without /etc/machine-name (CheckNodeEnv). UserData encodes a stage to the final
// cloud-config a machine receives, with what the host adds (sdk/SPEC.md §10), and CloudInitSchema validates it
// with the real cloud-init, failing (not skipping) when cloud-init is missing. IgnitionConfig and
// IgnitionValidate do the same for Ignition with Ignition's own Go parser (Check runs them for Ignition
// requests); ValidateUserData picks the pair for the request's utility. Request builds a realistic
// render request with the host's placeholders.
package plugintest
