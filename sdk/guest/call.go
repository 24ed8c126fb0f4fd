package guest

import (
	"encoding/json"
	"fmt"

	"github.com/osmhq/osm/sdk/abi"
)

// CallMetadata returns p's metadata as the host reads it: through JSON and validated.
func CallMetadata(p Plugin) (*abi.Metadata, error) {
	var md abi.Metadata
	if err := roundTrip(p, abi.ExportMetadata, nil, &md); err != nil {
		return nil, err
	}
	if err := md.Validate(); err != nil {
		return nil, err
	}
	return &md, nil
}

// Call renders req with p the way the host does over wasm: the request and the response both go through JSON,
// and the response gets the host's checks. Use it in a plugin's native tests. An empty req.ABIVersion is set
// to abi.Version, as the host would.
func Call(p Plugin, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	r := *req
	stamp(&r.ABIVersion)
	var resp abi.RenderResponse
	if err := roundTrip(p, abi.ExportRender, &r, &resp); err != nil {
		return nil, err
	}
	if err := resp.Check(); err != nil {
		return nil, err
	}
	return &resp, nil
}

// CallValidate is Call for osm_validate.
func CallValidate(p Plugin, req *abi.ValidateRequest) (*abi.ValidateResponse, error) {
	r := *req
	stamp(&r.ABIVersion)
	var resp abi.ValidateResponse
	if err := roundTrip(p, abi.ExportValidate, &r, &resp); err != nil {
		return nil, err
	}
	if err := resp.Check(); err != nil {
		return nil, err
	}
	return &resp, nil
}

// CallEncode is Call for osm_encode.
func CallEncode(p Plugin, req *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	r := *req
	stamp(&r.ABIVersion)
	var resp abi.EncodeResponse
	if err := roundTrip(p, abi.ExportEncode, &r, &resp); err != nil {
		return nil, err
	}
	if err := resp.Check(); err != nil {
		return nil, err
	}
	return &resp, nil
}

func roundTrip(p Plugin, export string, req, resp any) error {
	var in []byte
	if req != nil {
		var err error
		if in, err = json.Marshal(req); err != nil {
			return fmt.Errorf("cannot encode %s input: %w", export, err)
		}
	}
	out, err := Invoke(p, export, in)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, resp); err != nil {
		return fmt.Errorf("%s returned invalid JSON: %w", export, err)
	}
	return nil
}
