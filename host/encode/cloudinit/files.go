package cloudinit

import (
	"encoding/base64"
	"fmt"

	"github.com/osmhq/osm/host/nodeconfig"
	"github.com/osmhq/osm/sdk/abi"
)

// WriteFiles adds the configuration's files to write_files, in the transport each file's encoding asks for.
func WriteFiles(doc *Document, cfg *abi.NodeConfig) error {
	for _, f := range cfg.Files {
		wf, err := writeFile(f)
		if err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
		doc.WriteFiles = append(doc.WriteFiles, wf)
	}
	return nil
}

func writeFile(f abi.File) (WriteFile, error) {
	perm, err := nodeconfig.OctalString(f.Permissions)
	if err != nil {
		return WriteFile{}, err
	}
	var data, encoding string
	if f.Content.Inline != nil {
		data, encoding = f.Content.Inline.Data, f.Content.Inline.Encoding
	}
	transport, err := nodeconfig.ParseEncoding(encoding)
	if err != nil {
		return WriteFile{}, err
	}
	wf := WriteFile{Path: f.Path, Permissions: perm}
	switch transport {
	case nodeconfig.TransportPlain:
		wf.Content = data
	case nodeconfig.TransportBase64:
		wf.Encoding = "b64"
		wf.Content = base64.StdEncoding.EncodeToString([]byte(data))
	case nodeconfig.TransportGzip:
		wf.Encoding = "gz+b64"
		wf.Content = base64.StdEncoding.EncodeToString(nodeconfig.Gzip([]byte(data)))
	}
	return wf, nil
}
