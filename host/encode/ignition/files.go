package ignition

import (
	"encoding/base64"
	"fmt"
	"net/url"

	"github.com/coreos/ignition/v2/config/v3_3/types"
	"k8s.io/utils/ptr"

	"github.com/osmhq/osm/host/nodeconfig"
	"github.com/osmhq/osm/sdk/abi"
)

// Files turns the configuration's files, and the hostname, into Ignition storage files.
func Files(cfg *abi.NodeConfig, opts Options) ([]types.File, error) {
	var out []types.File
	if opts.Hostname != "" {
		out = append(out, file("/etc/hostname", 0o644, []byte(opts.Hostname+"\n")))
	}
	for _, f := range cfg.Files {
		var data []byte
		if f.Content.Inline != nil {
			data = []byte(f.Content.Inline.Data)
		}
		mode, err := nodeconfig.Mode(f.Permissions)
		if err != nil {
			return nil, fmt.Errorf("file %s: %w", f.Path, err)
		}
		out = append(out, file(f.Path, mode, data))
	}
	return out, nil
}

// file builds an Ignition file that replaces whatever is at path. Contents travel as a data URL: plain
// percent-encoding keeps small text readable, and larger contents are gzipped when that makes them smaller,
// which matters because the whole config is user-data with a provider size limit.
func file(path string, mode int, data []byte) types.File {
	return types.File{
		Node: types.Node{Path: path, Overwrite: ptr.To(true)},
		FileEmbedded1: types.FileEmbedded1{
			Mode:     ptr.To(mode),
			Contents: resource(data),
		},
	}
}

// gzipThreshold is the size above which compressing contents is worth the extra base64.
const gzipThreshold = 512

func resource(data []byte) types.Resource {
	plain := "data:," + url.PathEscape(string(data))
	if len(data) < gzipThreshold {
		return types.Resource{Source: ptr.To(plain)}
	}
	compressed := "data:;base64," + base64.StdEncoding.EncodeToString(nodeconfig.Gzip(data))
	if len(compressed) >= len(plain) {
		return types.Resource{Source: ptr.To(plain)}
	}
	return types.Resource{Source: ptr.To(compressed), Compression: ptr.To("gzip")}
}
