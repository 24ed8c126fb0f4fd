package osc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// Drift (docs/drift.md): the machines of a MachineDeployment revision are provisioned from the user-data as it
// was at the revision's first render; a re-render without a new revision reaches only machines created after
// it. The OSC records, in annotations the metadata-only cache holds (so the rollout controller and the next
// render read them without fetching an OSC), what the revision's machines were provisioned from and what
// renders now. They are written with the OSC a render creates anyway: drift costs no write of its own.
const (
	// AnnotationConfigDigest is the digest of the rendered configuration (the OSC spec, which holds no
	// credential): what a machine created now is provisioned from.
	AnnotationConfigDigest = "osm.k8c.io/config-digest"
	// AnnotationInputs are the per-input hashes of the render ("build=…,ca=…,…"; see driftInputs).
	AnnotationInputs = "osm.k8c.io/inputs"
	// AnnotationProvisionedDigest, AnnotationProvisionedInputs and AnnotationProvisionedProfileVersion are the
	// digest, inputs and profile version of the revision's first render, carried from OSC to OSC while the
	// revision stays.
	AnnotationProvisionedDigest         = "osm.k8c.io/provisioned-config-digest"
	AnnotationProvisionedInputs         = "osm.k8c.io/provisioned-inputs"
	AnnotationProvisionedProfileVersion = "osm.k8c.io/provisioned-osp-version"
	// AnnotationDriftedSince (RFC 3339) is set while the configuration differs from the revision's.
	AnnotationDriftedSince = "osm.k8c.io/drifted-since"
	// RolloutAnnotationPrefix prefixes MachineDeployment annotations that configure rollouts
	// (osm.k8c.io/rollout-policy, osm.k8c.io/rollout-window). They are not render inputs: setting a policy
	// re-renders nothing.
	RolloutAnnotationPrefix = "osm.k8c.io/rollout"
)

// Input names, as status.drift.inputs and the Drifted condition name them.
const (
	InputMachineDeployment = "machineDeployment"
	InputProfile           = "profile"
	InputPlugin            = "plugin"
	InputExtensions        = "extensions"
	InputFlags             = "flags"
	InputCA                = "ca"
	InputCluster           = "cluster"
	InputBuild             = "build"
)

// renderAnnotations are the MachineDeployment's annotations that are render inputs: all but the rollout
// configuration.
func renderAnnotations(md *clusterv1alpha1.MachineDeployment) map[string]string {
	for k := range md.Annotations {
		if strings.HasPrefix(k, RolloutAnnotationPrefix) {
			return maps.Collect(func(yield func(string, string) bool) {
				for k, v := range md.Annotations {
					if !strings.HasPrefix(k, RolloutAnnotationPrefix) && !yield(k, v) {
						return
					}
				}
			})
		}
	}
	return md.Annotations
}

func shortHash(v any) string {
	data, _ := json.Marshal(v)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// driftInputs hashes each render input on its own, so that drift names what changed. Computed only when a
// render is written.
func (r *Reconciler) driftInputs(st *state) map[string]string {
	ann := maps.Clone(renderAnnotations(st.md))
	delete(ann, clusterv1alpha1.AnnotationRevision)
	flags := r.Settings
	ca := []string{st.cluster.CACert, flags.KubernetesCACert, flags.HostCACert}
	flags.KubernetesCACert, flags.HostCACert = "", ""
	in := map[string]string{
		InputMachineDeployment: shortHash([]any{st.md.Spec.Template.Spec, ann}),
		InputProfile:           shortHash([]any{st.osp.UID, st.osp.Generation, st.osp.Spec.Version}),
		InputPlugin:            shortHash(append([]string{st.pluginDigest}, st.pipelineDigests...)),
		InputExtensions:        shortHash(st.extensionInputs),
		InputFlags:             shortHash(flags),
		InputCA:                shortHash(ca),
		InputCluster:           shortHash(st.cluster.ServerURL),
		InputBuild:             shortHash(r.Build),
	}
	return in
}

func encodeInputs(in map[string]string) string {
	parts := make([]string, 0, len(in))
	for _, k := range slices.Sorted(maps.Keys(in)) {
		parts = append(parts, k+"="+in[k])
	}
	return strings.Join(parts, ",")
}

func decodeInputs(s string) map[string]string {
	out := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(p, "="); ok {
			out[k] = v
		}
	}
	return out
}

// changedInputs names the inputs that differ between the revision's first render and now.
func changedInputs(provisioned, now map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if provisioned[k] != now[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		out = []string{"unknown"}
	}
	return out
}

// driftOutcome is what a render's OSC records about drift.
type driftOutcome struct {
	annotations map[string]string
	drift       *osmv1alpha1.ConfigDrift
	// started and resolved say the drift began or ended (without a new revision) with this render.
	started, resolved bool
}

// drift compares the render about to be written with what the machines of the MachineDeployment's revision
// were provisioned from: the previous OSC's record when it was rendered for the same revision; else, right after
// a takeover, the configuration upstream OSM rendered for that revision (its OSC, loadUpstreamOSC); else this
// render (a new revision's machines get it). An OSC written by an OSM without drift tracking has no record;
// this render then counts as the revision's first.
func (r *Reconciler) drift(st *state, now time.Time) driftOutcome {
	revision := st.md.Annotations[clusterv1alpha1.AnnotationRevision]
	digest := configDigest(&st.output.Spec)
	inputs := r.driftInputs(st)

	ann := map[string]string{
		AnnotationConfigDigest:              digest,
		AnnotationInputs:                    encodeInputs(inputs),
		AnnotationProvisionedDigest:         digest,
		AnnotationProvisionedInputs:         encodeInputs(inputs),
		AnnotationProvisionedProfileVersion: st.osp.Spec.Version,
	}
	var prev map[string]string
	if st.osc != nil {
		prev = st.osc.Annotations
	}
	switch {
	case prev[AnnotationRenderHash] != "" && prev[AnnotationRevision] == revision && prev[AnnotationProvisionedDigest] != "":
		for _, k := range []string{AnnotationProvisionedDigest, AnnotationProvisionedInputs, AnnotationProvisionedProfileVersion} {
			ann[k] = prev[k]
		}
	case st.upstreamOSC != nil:
		// The revision's machines were booted by upstream OSM: their configuration is its OSC's.
		ann[AnnotationProvisionedDigest] = configDigest(&st.upstreamOSC.Spec)
		ann[AnnotationProvisionedInputs] = encodeInputs(upstreamInputs(inputs))
		ann[AnnotationProvisionedProfileVersion] = st.upstreamOSC.Annotations[AnnotationOSPVersion]
	default:
		return driftOutcome{annotations: ann}
	}
	wasDrifted := prev[AnnotationDriftedSince] != ""
	if ann[AnnotationProvisionedDigest] == digest {
		return driftOutcome{annotations: ann, resolved: wasDrifted}
	}
	since := now.UTC().Truncate(time.Second)
	if t, err := time.Parse(time.RFC3339, prev[AnnotationDriftedSince]); err == nil {
		since = t
	}
	ann[AnnotationDriftedSince] = since.Format(time.RFC3339)
	return driftOutcome{
		annotations: ann,
		started:     !wasDrifted,
		drift: &osmv1alpha1.ConfigDrift{
			Since:                     metav1.NewTime(since),
			Revision:                  revision,
			Inputs:                    changedInputs(decodeInputs(ann[AnnotationProvisionedInputs]), inputs),
			ProvisionedDigest:         ann[AnnotationProvisionedDigest],
			CurrentDigest:             digest,
			ProvisionedProfileVersion: ann[AnnotationProvisionedProfileVersion],
		},
	}
}

// driftMessage says in one line what drifted.
func driftMessage(d *osmv1alpha1.ConfigDrift, profileVersion string) string {
	inputs := slices.Clone(d.Inputs)
	for i, in := range inputs {
		if in == InputProfile && d.ProvisionedProfileVersion != profileVersion {
			inputs[i] = fmt.Sprintf("profile (%s → %s)", d.ProvisionedProfileVersion, profileVersion)
		}
	}
	return fmt.Sprintf("the machines of revision %s were provisioned from configuration %s; OSM renders %s since %s (changed: %s); new machines get it, existing ones keep theirs until they are replaced",
		d.Revision, d.ProvisionedDigest, d.CurrentDigest, d.Since.UTC().Format(time.RFC3339), strings.Join(inputs, ", "))
}

// setDrift records the outcome in a new OSC's status and tells the MachineDeployment when drift starts or
// ends (one event per change, never in the steady state).
func (r *Reconciler) setDrift(st *state, status *osmv1alpha1.OperatingSystemConfigStatus, d driftOutcome) {
	status.Drift = d.drift
	if d.drift != nil {
		msg := driftMessage(d.drift, st.osp.Spec.Version)
		setCondition(status, osmv1alpha1.ConditionDrifted, metav1.ConditionTrue, osmv1alpha1.ReasonConfigurationChanged, msg)
		return
	}
	setCondition(status, osmv1alpha1.ConditionDrifted, metav1.ConditionFalse, osmv1alpha1.ReasonInSync,
		"the machines of revision "+st.md.Annotations[clusterv1alpha1.AnnotationRevision]+" are provisioned from this configuration")
}

// notifyDrift records the start or the end of drift as an event on the MachineDeployment.
func (r *Reconciler) notifyDrift(st *state, d driftOutcome) {
	switch {
	case d.started:
		r.Recorder.Event(st.md, corev1.EventTypeWarning, osmv1alpha1.ConditionDrifted, driftMessage(d.drift, st.osp.Spec.Version))
	case d.resolved:
		r.Recorder.Event(st.md, corev1.EventTypeNormal, "DriftResolved",
			"the configuration is again the one the machines of revision "+st.md.Annotations[clusterv1alpha1.AnnotationRevision]+" were provisioned from")
	}
}

// configDigest is the digest of a configuration's JSON (json.Marshal's bytes), encoded straight into the
// hash: the spec is tens of KiB, a buffer per MachineDeployment otherwise. The digest is recorded on OSCs, so
// it must stay what json.Marshal gives.
func configDigest(spec *osmv1alpha1.OperatingSystemConfigSpec) string {
	h := sha256.New()
	_ = json.NewEncoder(withoutFinalNewline{h}).Encode(spec)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// withoutFinalNewline drops the newline json.Encoder ends its one write with.
type withoutFinalNewline struct{ w io.Writer }

func (t withoutFinalNewline) Write(p []byte) (int, error) {
	if _, err := t.w.Write(bytes.TrimSuffix(p, []byte("\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// upstreamInputs are the input hashes recorded for a revision upstream OSM provisioned: the profile, the
// plugin and the build are upstream's (whatever they hash to now differs); the MachineDeployment, flags, CAs
// and cluster are taken as the same, since upstream's OSC does not say.
func upstreamInputs(now map[string]string) map[string]string {
	in := maps.Clone(now)
	for _, k := range []string{InputProfile, InputPlugin, InputBuild} {
		in[k] = "upstream-osm"
	}
	return in
}

// loadUpstreamOSC reads upstream OSM's OSC of the MachineDeployment, when OSM has no record of its revision
// (st.osc is not a render of OSM's) and upstream's was rendered for the current revision: the machines of that
// revision were booted from it, so drift compares with it. One read past the cache (which holds OSC metadata
// only), on the first render after a takeover; none when the cache shows no upstream OSC.
func (r *Reconciler) loadUpstreamOSC(ctx context.Context, st *state) {
	st.upstreamOSC = nil
	if (st.osc != nil && st.osc.Annotations[AnnotationRenderHash] != "") || r.MgmtAPIReader == nil {
		return
	}
	key := client.ObjectKey{Namespace: r.Settings.Namespace, Name: UpstreamOSCName(st.md)}
	meta := OSCMeta()
	if err := r.Mgmt.Get(ctx, key, meta); err != nil || markedByOSM(meta) ||
		meta.Annotations[AnnotationRevision] != st.md.Annotations[clusterv1alpha1.AnnotationRevision] {
		return
	}
	up := &osmv1alpha1.OperatingSystemConfig{}
	if err := r.MgmtAPIReader.Get(ctx, key, up); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "reading upstream OSM's OperatingSystemConfig for drift", "name", key.Name)
		return
	}
	st.upstreamOSC = up
}
