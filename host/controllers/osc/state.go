package osc

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
)

// state is what one reconcile learns and decides, passed from step to step.
type state struct {
	md      *clusterv1alpha1.MachineDeployment
	osp     *osmv1alpha1.OperatingSystemProfile
	cluster render.ClusterInfo
	hash    string
	// pluginDigest, pipelineDigests and extensionInputs are parts of hash, kept to name what drifted.
	pluginDigest    string
	pipelineDigests []string
	extensionInputs any
	// kubeletSecret says the profile needs the kubelet bootstrap kubeconfig Secret (needsKubeletBootstrapSecret).
	kubeletSecret bool
	// extensions are the OperatingSystemProfileExtensions that apply, in order.
	extensions []*osmv1alpha1.OperatingSystemProfileExtension

	osc          *osmv1alpha1.OperatingSystemConfig // current, nil if none; its metadata only unless oscStatusRead
	bootstrap    *corev1.Secret                     // current, nil if none
	provisioning *corev1.Secret
	kubeletBoot  *corev1.Secret
	// upstreamOSC is upstream OSM's OSC of the current revision, read right after a takeover (loadUpstreamOSC).
	upstreamOSC *osmv1alpha1.OperatingSystemConfig
	// oscStatusRead says st.osc's status is known: this reconcile wrote it, or read it past the cache (which
	// holds OSC metadata only, see OSCMeta).
	oscStatusRead bool

	// bootstrapToken is the node credential: the provisioning fetch's and the kubelet's TLS bootstrap's.
	bootstrapToken credentials.Token
	tokenTTL       time.Duration
	// bindReader says the reader RoleBinding must be (re)pointed at bootstrapToken's user before the bootstrap
	// Secret hands the token out.
	bindReader bool

	// pluginSecrets are the values of the profile's spec.plugin.secrets by name, and pluginSecretsHash their
	// digest (see AnnotationPluginSecretsHash).
	pluginSecrets     map[string]string
	pluginSecretsHash string

	output *render.Output
	// done is set when everything is already up to date: no render, no write.
	done bool
	// wrote lists what this reconcile changed, for the log; writes run concurrently (noteWrote).
	wrote []string
	// expected is what the caches must show before the next reconcile of the MachineDeployment starts (await.go).
	expected []expectation
	// mu guards wrote and expected.
	mu sync.Mutex
	// renderTook is the time spent rendering and encoding (templates, plugin, encoders), without API calls.
	renderTook time.Duration
	// sizes of the user-data written.
	bootstrapSize, provisioningSize int
}

// refreshAfter is when the bootstrap token needs extending next.
func (st *state) refreshAfter(now time.Time) time.Duration {
	tok := st.bootstrapToken
	if tok.Expires.IsZero() || st.tokenTTL == 0 {
		return 0
	}
	return max(tok.Expires.Add(-credentials.RefreshMargin(st.tokenTTL)).Sub(now)+time.Second, time.Second)
}

// noteWrote records a write; the writes of one reconcile run concurrently.
func (st *state) noteWrote(what string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.wrote = append(st.wrote, what)
}
