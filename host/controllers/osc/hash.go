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
//
// pluginDigest is the digest of the module the profile's plugin resolves to now, so a new image or a rebuilt
// built-in re-renders, while a profile's status catching up with a digest it already rendered with does not.
func inputHash(md *clusterv1alpha1.MachineDeployment, osp *osmv1alpha1.OperatingSystemProfile, pluginDigest string, cluster render.ClusterInfo, settingsHash, build string) string {
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
	}{Template: md.Spec.Template.Spec, Annotations: renderAnnotations(md), Cluster: cluster, Settings: settingsHash, Build: build}
	in.Profile.UID, in.Profile.Generation, in.Profile.Version, in.Profile.Digest = string(osp.UID), osp.Generation, osp.Spec.Version, pluginDigest
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
