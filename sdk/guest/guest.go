// Package guest turns a plain Go type into an OSM plugin.
//
// A plugin author implements Plugin (and, if needed, Validator and Encoder) and registers it from an init
// function of package main:
//
//	func init() { guest.Register(&myPlugin{}) }
//	func main() {}
//
// Built with `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared`, this package exports the ABI v1 functions
// (osm_metadata, osm_render, osm_validate, osm_encode) through the Extism PDK. A c-shared module runs package
// initialisers but never main.main, which is why registration belongs in init; the host refuses a module
// built without -buildmode=c-shared.
//
// Built natively, the same package offers Call, CallMetadata, CallValidate and CallEncode, which push values
// through exactly the JSON round trip and checks of the wasm path, so `go test` on the plugin package catches
// output the host would reject.
package guest

import (
	"sync"

	"github.com/osmhq/osm/sdk/abi"
)

// Plugin is what every OSM plugin implements.
type Plugin interface {
	// Metadata describes the plugin. It is called once when the host loads the module. ABIVersion and Exports
	// may be left empty: the guest package fills them in.
	Metadata() abi.Metadata
	// Render returns the final configuration of a stage. It must be deterministic and copy the placeholders of
	// RenderContext.Secrets verbatim. A returned error is shown to the operator: make it one actionable line.
	Render(req *abi.RenderRequest) (*abi.RenderResponse, error)
}

// Validator is implemented by plugins that check profiles at admission time (osm_validate).
type Validator interface {
	Validate(req *abi.ValidateRequest) (*abi.ValidateResponse, error)
}

// Encoder is implemented by plugins that encode a provisioning format of their own (osm_encode).
type Encoder interface {
	Encode(req *abi.EncodeRequest) (*abi.EncodeResponse, error)
}

var (
	mu         sync.Mutex
	registered Plugin
)

// Register makes p the plugin this module serves. Call it exactly once, from an init function; a second call
// panics because two plugins in one module would be an authoring mistake that is better caught at build-test
// time than in production.
func Register(p Plugin) {
	mu.Lock()
	defer mu.Unlock()
	if p == nil {
		panic("guest.Register: plugin is nil")
	}
	if registered != nil {
		panic("guest.Register: a plugin is already registered; a module serves exactly one plugin")
	}
	registered = p
}

// current returns the registered plugin, or nil. The wasip1 exports use it.
func current() Plugin { //nolint:unused // called from export_wasip1.go only
	mu.Lock()
	defer mu.Unlock()
	return registered
}

// Exports lists the ABI exports p implements, in ABI order.
func Exports(p Plugin) []string {
	exports := []string{abi.ExportMetadata, abi.ExportRender}
	if _, ok := p.(Validator); ok {
		exports = append(exports, abi.ExportValidate)
	}
	if _, ok := p.(Encoder); ok {
		exports = append(exports, abi.ExportEncode)
	}
	return exports
}
