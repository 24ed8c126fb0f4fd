package guest

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/osmhq/osm/sdk/abi"
	json "github.com/osmhq/osm/sdk/internal/wirejson"
)

// Invoke runs one ABI export of p on the JSON input, exactly as the wasm module does: it decodes the request,
// checks its abiVersion, calls the plugin, stamps the response's abiVersion and encodes it. A panic in the
// plugin becomes an error starting with "plugin panicked:" (and the stack goes to stderr, which the host
// captures into its log), so a bug in one render fails that render instead of the module.
func Invoke(p Plugin, export string, input []byte) (out []byte, err error) {
	if p == nil {
		return nil, errors.New("no plugin registered: call guest.Register from an init function of package main")
	}
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "plugin panicked in %s: %v\n%s", export, r, debug.Stack())
			out, err = nil, fmt.Errorf("plugin panicked: %v", r)
		}
	}()
	switch export {
	case abi.ExportMetadata:
		md := p.Metadata()
		if md.ABIVersion == "" {
			md.ABIVersion = abi.Version
		}
		md.Exports = Exports(p)
		return encode(md, 1024)
	case abi.ExportRender:
		var req abi.RenderRequest
		if err := decode("render request", input, &req, &req.ABIVersion); err != nil {
			return nil, err
		}
		resp, err := p.Render(&req)
		if err != nil {
			return nil, err
		}
		if resp == nil {
			return nil, errors.New("plugin bug: Render returned neither a response nor an error")
		}
		stamp(&resp.ABIVersion)
		return encode(resp, len(input)+len(input)/4)
	case abi.ExportValidate:
		v, ok := p.(Validator)
		if !ok {
			return nil, errors.New("plugin does not implement osm_validate")
		}
		var req abi.ValidateRequest
		if err := decode("validate request", input, &req, &req.ABIVersion); err != nil {
			return nil, err
		}
		resp, err := v.Validate(&req)
		if err != nil {
			return nil, err
		}
		if resp == nil {
			resp = &abi.ValidateResponse{}
		}
		stamp(&resp.ABIVersion)
		return encode(resp, 1024)
	case abi.ExportEncode:
		e, ok := p.(Encoder)
		if !ok {
			return nil, errors.New("plugin does not implement osm_encode")
		}
		var req abi.EncodeRequest
		if err := decode("encode request", input, &req, &req.ABIVersion); err != nil {
			return nil, err
		}
		resp, err := e.Encode(&req)
		if err != nil {
			return nil, err
		}
		if resp == nil {
			return nil, errors.New("plugin bug: Encode returned neither a response nor an error")
		}
		stamp(&resp.ABIVersion)
		return encode(resp, 1024)
	default:
		return nil, fmt.Errorf("unknown export %q", export)
	}
}

// encode encodes v into a buffer of the expected size, so that it is not regrown.
func encode(v any, size int) ([]byte, error) { return json.MarshalSize(v, size) }

// decode unmarshals a request envelope and checks its abiVersion. A host that speaks another major version must
// not get a half-understood render.
func decode(what string, input []byte, v any, version *string) error {
	if err := json.Unmarshal(input, v); err != nil {
		return fmt.Errorf("cannot decode %s: %w", what, err)
	}
	return abi.CheckEnvelope(what, *version)
}

func stamp(v *string) {
	if *v == "" {
		*v = abi.Version
	}
}
