package cloudinit

import (
	"fmt"
	"unicode/utf8"

	"github.com/osmhq/osm/host/nodeconfig"
	"github.com/osmhq/osm/sdk/abi"
)

// WriteFiles adds the configuration's files to write_files. Text is written as is; content that is not valid
// UTF-8 text (binaries, gzip) is written as base64 so YAML cannot mangle it.
func WriteFiles(doc *Document, cfg *abi.NodeConfig) error {
	for _, f := range cfg.Files {
		wf, err := writeFile(f.Path, f.Permissions, f.Content)
		if err != nil {
			return err
		}
		doc.WriteFiles = append(doc.WriteFiles, wf)
	}
	return nil
}

func writeFile(path string, permissions *int32, content abi.FileContent) (WriteFile, error) {
	perm, err := nodeconfig.OctalString(permissions)
	if err != nil {
		return WriteFile{}, fmt.Errorf("file %s: %w", path, err)
	}
	data, err := nodeconfig.Decode(content)
	if err != nil {
		return WriteFile{}, fmt.Errorf("file %s: %w", path, err)
	}
	wf := WriteFile{Path: path, Permissions: perm}
	if utf8.Valid(data) {
		wf.Content = string(data)
		return wf, nil
	}
	wf.Encoding = "b64"
	wf.Content = base64Encode(data)
	return wf, nil
}
