// Command sandbox reports what the sandbox lets a plugin see: the clock, randomness, the file system, the
// environment and the network. The runtime's tests check that none of it is real.
package main

import (
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"time"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
)

type plugin struct{}

func (plugin) Metadata() abi.Metadata {
	return abi.Metadata{Name: "sandbox", Version: "1.0.0", OperatingSystems: []abi.OperatingSystem{{Name: "testos"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit}, CloudProviders: []string{"*"}}
}

func (plugin) Render(*abi.RenderRequest) (*abi.RenderResponse, error) {
	var cfg abi.NodeConfig
	b := make([]byte, 16)
	_, _ = crand.Read(b)
	_, fsErr := os.ReadDir("/")
	_, netErr := net.Dial("tcp", "127.0.0.1:80")
	report := map[string]string{
		"time":     time.Now().UTC().Format(time.RFC3339Nano),
		"crand":    hex.EncodeToString(b),
		"mathrand": fmt.Sprint(rand.Int64()),
		"fs":       fmt.Sprint(fsErr != nil),
		"net":      fmt.Sprint(netErr != nil),
		"env":      strings.Join(os.Environ(), ","),
	}
	for _, k := range abi.SortedKeys(report) {
		cfg.Files = append(cfg.Files, abi.PlainFile("/sandbox/"+k, 0o644, report[k]))
	}
	return &abi.RenderResponse{Config: cfg}, nil
}

func init() { guest.Register(plugin{}) }

func main() {}
