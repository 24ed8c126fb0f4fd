package osc

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
)

// inputHash identifies everything a render depends on. When the OSC and both Secrets carry the current hash,
// the reconciler neither renders nor writes: that is what keeps a resync of thousands of MachineDeployments
// cheap and keeps machine-controller from seeing churn.
func inputHash(md *clusterv1alpha1.MachineDeployment, osp *osmv1alpha1.OperatingSystemProfile, cluster render.ClusterInfo, settingsHash, build string) string {
	in := struct {
		Template    clusterv1alpha1.MachineSpec
		Annotations map[string]string
		Profile     struct {
			UID        string
			Generation int64
			Version    string
			Digest     string
		}
		Cluster  render.ClusterInfo
		Settings string
		Build    string
	}{Template: md.Spec.Template.Spec, Annotations: md.Annotations, Cluster: cluster, Settings: settingsHash, Build: build}
	in.Profile.UID, in.Profile.Generation, in.Profile.Version = string(osp.UID), osp.Generation, osp.Spec.Version
	if osp.Status.Plugin != nil {
		in.Profile.Digest = osp.Status.Plugin.Digest
	}
	data, _ := json.Marshal(in)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// SettingsHash identifies the controller's node settings, so a flag change re-renders everything.
func SettingsHash(s render.Settings) string {
	data, _ := json.Marshal(s)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}
