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
// A fixture is testdata/<case>.request.json (an abi.RenderRequest) with either <case>.response.json (the
// expected abi.RenderResponse) or <case>.error.txt (text the error must contain). `go test -update` rewrites
// the response files from what the plugin returns.
package plugintest
