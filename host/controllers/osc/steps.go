package osc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/internal/failure"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/internal/parallel"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

// profileKey is the profile a MachineDeployment names.
func (r *Reconciler) profileKey(md *clusterv1alpha1.MachineDeployment) client.ObjectKey {
	ns, name := render.ProfileKey(md, r.Settings.Namespace)
	return client.ObjectKey{Namespace: ns, Name: name}
}

func (r *Reconciler) loadProfile(ctx context.Context, st *state) error {
	key := r.profileKey(st.md)
	st.osp = &osmv1alpha1.OperatingSystemProfile{}
	if err := r.Mgmt.Get(ctx, key, st.osp); err != nil {
		st.osp = nil
		if apierrors.IsNotFound(err) {
			return failure.Stalled(osmv1alpha1.ReasonProfileNotFound, fmt.Errorf("OperatingSystemProfile %s does not exist; create it or fix the %s annotation", key, clusterv1alpha1.AnnotationOSP))
		}
		return fmt.Errorf("reading OperatingSystemProfile %s: %w", key, err)
	}
	// Tenancy: a profile of another namespace serves this MachineDeployment only when its owner allows it.
	// Nothing of a profile that does not — its plugin secrets, pull secret, extensions — is read or rendered.
	if err := render.ProfileAllowed(st.osp, st.md.Namespace, r.Settings.Namespace); err != nil {
		st.osp = nil
		// What it rendered while the profile allowed it is withdrawn; without the finalizer nothing was.
		if controllerutil.ContainsFinalizer(st.md, Finalizer) {
			if werr := r.withdrawUserData(ctx, st.md); werr != nil {
				return fmt.Errorf("withdrawing the user-data of a profile that no longer allows namespace %s: %w", st.md.Namespace, werr)
			}
		}
		return failure.Stalled(osmv1alpha1.ReasonProfileNotAllowed, err)
	}
	var err error
	if st.cluster, err = r.ClusterInfo(ctx); err != nil {
		return failure.Stalled(osmv1alpha1.ReasonRenderFailed, err)
	}
	st.pluginDigest = r.pluginDigest(ctx, st.osp.Namespace, st.osp.Spec.Plugin)
	st.hash = inputHash(st.md, st.osp, st.pluginDigest, st.cluster, r.settingsHash, r.Build)
	st.kubeletSecret = r.needsKubeletBootstrapSecret(st.osp)
	return nil
}

// pluginDigest names the module a plugin reference (a profile's or an extension's, in namespace) resolves to,
// for the render hash, without loading it when the source can tell (render.PluginIdentifier). A plugin that
// does not resolve hashes as empty; the render then reports why.
func (r *Reconciler) pluginDigest(ctx context.Context, namespace string, ref *osmv1alpha1.PluginReference) string {
	if ref == nil || r.Renderer.Plugins == nil {
		return ""
	}
	if ider, ok := r.Renderer.Plugins.(render.PluginIdentifier); ok {
		id, _, err := ider.Identify(ctx, namespace, ref)
		if err != nil {
			return ""
		}
		return id.Digest
	}
	p, err := r.Renderer.Plugins.Resolve(ctx, namespace, ref)
	if err != nil {
		return ""
	}
	return p.Identity().Digest
}

// loadCurrent reads, from the caches, what was written for the MachineDeployment before, and refuses to go on
// when any of it belongs to another MachineDeployment (see conflict).
func (r *Reconciler) loadCurrent(ctx context.Context, st *state) error {
	osc := OSCMeta()
	switch err := r.Mgmt.Get(ctx, client.ObjectKey{Namespace: r.Settings.Namespace, Name: render.OSCName(st.md)}, osc); {
	case err == nil:
		if !credentials.Owns(st.md, osc) {
			return failure.Stalled(osmv1alpha1.ReasonNameConflict, &credentials.ConflictError{Kind: "OperatingSystemConfig",
				Name: osc.Namespace + "/" + osc.Name, Owner: credentials.Owner(osc)})
		}
		st.osc, st.oscStatusRead = &osmv1alpha1.OperatingSystemConfig{ObjectMeta: osc.ObjectMeta}, false
	case !apierrors.IsNotFound(err):
		return err
	}
	for _, s := range []struct {
		name     string
		into     **corev1.Secret
		contract bool
	}{
		{render.BootstrapSecretName(st.md), &st.bootstrap, true},
		{render.ProvisioningSecretName(st.md), &st.provisioning, true},
		{render.KubeletBootstrapSecretName(st.md), &st.kubeletBoot, false},
	} {
		secret := &corev1.Secret{}
		switch err := r.Worker.Get(ctx, client.ObjectKey{Namespace: r.Settings.CloudInitSettingsNamespace, Name: s.name}, secret); {
		case err == nil:
			if !credentials.Owns(st.md, secret) {
				return r.conflict(ctx, st, secret, s.contract)
			}
			*s.into = secret
		case !apierrors.IsNotFound(err):
			return err
		}
	}
	return nil
}

// conflict handles a Secret OSM needs for st.md that belongs to another MachineDeployment. machine-controller's
// Secret names cannot tell c/a-b from b-c/a, so the MachineDeployment that wrote them first keeps them; this
// one writes nothing and holds no node credential: a credential of its own would be allowed to read the
// other's provisioning Secret, which has the very name its Role grants. Credentials it was issued while it
// owned the Secrets are revoked when the cache still shows any. The owner's Secrets going away brings it
// back (see secretHandler); the retry after a pause covers an event missed across a restart.
func (r *Reconciler) conflict(ctx context.Context, st *state, secret *corev1.Secret, contract bool) error {
	reason := osmv1alpha1.ReasonNameConflict
	if contract {
		reason = osmv1alpha1.ReasonSecretNameConflict
	}
	holds, err := r.holdsCredentials(ctx, st.md)
	if err != nil {
		return err
	}
	if holds {
		if err := r.Issuer.Revoke(ctx, st.md); err != nil {
			return err
		}
	}
	return failure.Retrying(reason, &credentials.ConflictError{Kind: "Secret", Name: secret.Namespace + "/" + secret.Name, Owner: credentials.Owner(secret)})
}

// holdsCredentials reports whether the worker cache shows a bootstrap token, reader Role or reader RoleBinding
// of md's.
func (r *Reconciler) holdsCredentials(ctx context.Context, md *clusterv1alpha1.MachineDeployment) (bool, error) {
	if role, binding := r.Issuer.ReaderMissing(ctx, r.Worker, md); !role || !binding {
		return true, nil
	}
	tokens := &corev1.SecretList{}
	if err := r.Worker.List(ctx, tokens, client.InNamespace(metav1.NamespaceSystem), credentials.Selector(md)); err != nil {
		return false, fmt.Errorf("listing the bootstrap tokens of %s: %w", credentials.OwnerKey(md), err)
	}
	return len(tokens.Items) > 0, nil
}

// issueCredentials makes sure the MachineDeployment has a valid bootstrap token and a reader Role, and decides
// whether the Role's binding must be written with the outputs. The bootstrap Secret records the token it hands
// out: a token equal to it was bound before that Secret was written, so a reconcile that finds it costs no
// RBAC call. For a new MachineDeployment the token and the Role are created at the same time; the binding,
// which needs both, goes with the provisioning Secret (writeSecrets).
func (r *Reconciler) issueCredentials(ctx context.Context, st *state) error {
	st.tokenTTL = r.Issuer.TokenTTL()
	recorded := ""
	if st.bootstrap != nil {
		recorded = string(st.bootstrap.Data[KeyProvisioningToken])
	}
	err := parallel.Do(func() (err error) {
		st.bootstrapToken, err = r.Issuer.BootstrapToken(ctx, st.md)
		if err == nil {
			r.expectToken(st)
		}
		return err
	}, func() error {
		if recorded != "" {
			return nil
		}
		return r.ensureReaderRole(ctx, st)
	})
	if err == nil && st.bootstrapToken.Value != recorded {
		st.bindReader = true
		if recorded != "" {
			// A new token for a MachineDeployment that had one (revoked, or from an OSM version that issued
			// ServiceAccount tokens): rare, so the Role is checked in its own round trip.
			err = r.ensureReaderRole(ctx, st)
		}
	}
	if err == nil && !st.bindReader {
		err = r.restoreReader(ctx, st)
	}
	if err != nil {
		return failure.FromCredentials(err)
	}
	return nil
}

// restoreReader puts back the reader Role and RoleBinding of a token the bootstrap Secret already hands out,
// when the cache shows either deleted: without them the MachineDeployment's new machines get 403 on their
// provisioning data. A deletion brings the MachineDeployment here (see SetupWithManager).
func (r *Reconciler) restoreReader(ctx context.Context, st *state) error {
	roleGone, bindingGone := r.Issuer.ReaderMissing(ctx, r.Worker, st.md)
	if roleGone {
		if err := r.ensureReaderRole(ctx, st); err != nil {
			return err
		}
	}
	if !roleGone && !bindingGone {
		return nil
	}
	return r.bindReader(ctx, st)
}

// ensureReaderRole is Issuer.EnsureReaderRole, after which the cache must show the Role.
func (r *Reconciler) ensureReaderRole(ctx context.Context, st *state) error {
	err := r.Issuer.EnsureReaderRole(ctx, st.md)
	st.expect(err, r.readerExpectation(st, credentials.ReaderRoleMeta()))
	return err
}

// bindReader is Issuer.BindReader to the bootstrap token, after which the cache must show the RoleBinding.
func (r *Reconciler) bindReader(ctx context.Context, st *state) error {
	err := r.Issuer.BindReader(ctx, st.md, st.bootstrapToken)
	st.expect(err, r.readerExpectation(st, credentials.ReaderBindingMeta()))
	if err != nil {
		return err
	}
	st.noteWrote("RoleBinding " + credentials.ProvisioningReaderName(st.md))
	return nil
}

// readerExpectation is the worker cache showing md's reader Role or RoleBinding (obj's kind), which
// restoreReader would otherwise put back.
func (r *Reconciler) readerExpectation(st *state, obj *metav1.PartialObjectMetadata) expectation {
	obj.Namespace, obj.Name = r.Issuer.Namespace, credentials.ProvisioningReaderName(st.md)
	return expectation{cache: r.Worker, obj: obj}
}

// expectToken expects the worker cache to show the bootstrap token with the expiration BootstrapToken
// returned: the next reconcile's BootstrapToken then reuses it instead of creating or extending it again.
func (r *Reconciler) expectToken(st *state) {
	tok := st.bootstrapToken
	id, _, ok := strings.Cut(tok.Value, ".")
	if !ok || tok.Expires.IsZero() {
		return
	}
	// Bootstrap token Secrets are named bootstrap-token-<id> in kube-system (k8s.io/cluster-bootstrap).
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "bootstrap-token-" + id}}
	expires := tok.Expires.UTC().Format(time.RFC3339)
	st.expect(nil, expectation{cache: r.Worker, obj: secret, also: func(o client.Object) bool {
		return string(o.(*corev1.Secret).Data["expiration"]) == expires
	}})
}

// upToDate reports whether everything written carries the current render hash and credentials.
func (r *Reconciler) upToDate(st *state) bool {
	if !r.renderedCurrent(st) || (st.kubeletBoot == nil && st.kubeletSecret) {
		return false
	}
	if string(st.bootstrap.Data[KeyProvisioningToken]) != st.bootstrapToken.Value || !pluginSecretsCurrent(st) {
		return false
	}
	return !st.kubeletSecret || bytes.Equal(st.kubeletBoot.Data[KeyKubeconfig], []byte(r.kubeletKubeconfig(st)))
}

// removeUnneededKubeletSecret deletes the MachineDeployment's kubelet bootstrap kubeconfig Secret once its
// profile no longer fetches it, after the user-data that no longer names it is written (the steps before).
// A MachineDeployment rendered from a templates-only profile gets one; when the profile becomes a plugin's (an
// upstream default profile taken over by OSM's, seconds after start), nothing else would ever delete it, and
// it holds a bootstrap token's kubeconfig.
func (r *Reconciler) removeUnneededKubeletSecret(ctx context.Context, st *state) error {
	if st.kubeletSecret || st.kubeletBoot == nil || st.osp == nil {
		return nil
	}
	uid := st.kubeletBoot.UID
	err := r.Worker.Delete(ctx, st.kubeletBoot, client.Preconditions{UID: &uid})
	st.expect(err, expectation{cache: r.Worker, before: versionOf(st.kubeletBoot), gone: true,
		obj: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: st.kubeletBoot.Namespace, Name: st.kubeletBoot.Name}}})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting Secret %s/%s, which profile %s no longer uses: %w", st.kubeletBoot.Namespace, st.kubeletBoot.Name, st.osp.Name, err)
	}
	st.noteWrote("deleted Secret " + st.kubeletBoot.Name)
	st.kubeletBoot = nil
	return nil
}

// needsKubeletBootstrapSecret reports whether the profile fetches the kubelet's bootstrap kubeconfig from its
// own Secret, as upstream's profiles do (they name .BootstrapKubeconfigSecretName somewhere in their spec).
// Plugins put it into the provisioning user-data instead, so for them the Secret would only be one more write
// and one more object. The answer is kept per profile generation: finding the name takes marshalling the spec.
func (r *Reconciler) needsKubeletBootstrapSecret(osp *osmv1alpha1.OperatingSystemProfile) bool {
	if osp.Spec.Plugin == nil {
		return true
	}
	type answer struct {
		generation int64
		needs      bool
	}
	if a, ok := r.kubeletSecretNeeded.Load(osp.UID); ok && a.(answer).generation == osp.Generation && osp.Generation != 0 {
		return a.(answer).needs
	}
	data, _ := json.Marshal(osp.Spec)
	needs := bytes.Contains(data, []byte("BootstrapKubeconfigSecretName"))
	r.kubeletSecretNeeded.Store(osp.UID, answer{osp.Generation, needs})
	return needs
}

func (r *Reconciler) kubeletKubeconfig(st *state) string {
	server := st.cluster.ServerURL
	if r.Settings.OverrideBootstrapKubeletAPIServer != "" {
		server = r.Settings.OverrideBootstrapKubeletAPIServer
	}
	ca := st.cluster.CACert
	if r.Settings.KubernetesCACert != "" {
		ca = r.Settings.KubernetesCACert
	}
	return render.BootstrapKubeconfig(server, ca, st.bootstrapToken.Value)
}

// renderIfNeeded renders the profile unless everything is current.
func (r *Reconciler) renderIfNeeded(ctx context.Context, st *state) error {
	if r.upToDate(st) {
		st.done = true
		return nil
	}
	if st.output != nil {
		return nil // rendered while the credentials were issued
	}
	return r.render(ctx, st)
}

// renderedCurrent reports whether every rendered object exists and carries the current render hash: then
// only a credential can make writing necessary.
func (r *Reconciler) renderedCurrent(st *state) bool {
	if st.osc == nil || st.bootstrap == nil || st.provisioning == nil {
		return false
	}
	for _, ann := range []map[string]string{st.osc.Annotations, st.bootstrap.Annotations, st.provisioning.Annotations} {
		if ann[AnnotationRenderHash] != st.hash {
			return false
		}
	}
	return true
}

func (r *Reconciler) render(ctx context.Context, st *state) error {
	start := time.Now()
	out, err := r.Renderer.Render(ctx, render.Input{MachineDeployment: st.md, Profile: st.osp, Cluster: st.cluster, Settings: r.Settings, Extensions: st.extensions})
	st.renderTook += time.Since(start)
	if err != nil {
		return r.renderFailure(ctx, err)
	}
	st.output = out
	return nil
}

// renderFailure classifies a render error (failure.FromRender), unless the controller is stopping: then nothing
// is wrong with the profile or the plugin.
func (r *Reconciler) renderFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return failure.FromRender(err)
}

// annotations are what upstream OSM puts on the OSC and the Secrets, plus OSM's render hash.
func (r *Reconciler) annotations(st *state) map[string]string {
	return map[string]string{
		AnnotationRevision:          st.md.Annotations[clusterv1alpha1.AnnotationRevision],
		AnnotationOSPVersion:        st.osp.Spec.Version,
		AnnotationMDAnnotationsHash: render.AnnotationsHash(st.md),
		AnnotationRenderHash:        st.hash,
	}
}

// writeConfig writes the OSC, with the status of a successful reconcile: the OSC has no status subresource,
// so spec and status are one create instead of a create and a status write of the whole object (measured:
// a status patch of a rendered OSC costs the API server more than its create). It runs with the last Secret
// write; if that fails, report corrects the status. Its spec is immutable (as upstream's): a new render
// replaces the object.
func (r *Reconciler) writeConfig(ctx context.Context, st *state) error {
	// A placeholder (createPlaceholder) carries no render hash, so this is a rendered OSC.
	if st.osc != nil && st.osc.Annotations[AnnotationRenderHash] == st.hash {
		return nil
	}
	// The delete is conditional on the UID read and the create on nothing being there: on a cache behind our
	// own writes either fails as Outdated (failure.IsOutdated), and the reconcile runs again once the cache
	// shows what is there.
	before := versionOf(st.osc)
	if st.osc != nil {
		err := r.Mgmt.Delete(ctx, st.osc, client.Preconditions{UID: &st.osc.UID})
		if client.IgnoreNotFound(err) != nil {
			st.expect(err, r.oscExpectation(st, before))
			return fmt.Errorf("replacing OperatingSystemConfig %s: %w", st.osc.Name, err)
		}
	}
	r.loadUpstreamOSC(ctx, st)
	drift := r.drift(st, time.Now())
	ann := r.annotations(st)
	maps.Copy(ann, drift.annotations)
	osc := &osmv1alpha1.OperatingSystemConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.Settings.Namespace, Name: render.OSCName(st.md), Annotations: ann},
		Spec:       st.output.Spec,
	}
	r.setStatus(st, &osc.Status, nil)
	r.setDrift(st, &osc.Status, drift)
	credentials.Mark(st.md, osc)
	err := r.Mgmt.Create(ctx, osc)
	st.expect(err, r.oscExpectation(st, before))
	if err != nil {
		return fmt.Errorf("creating OperatingSystemConfig %s: %w", osc.Name, err)
	}
	st.osc, st.oscStatusRead = osc, true
	st.noteWrote("OperatingSystemConfig " + osc.Name)
	r.notifyDrift(st, drift)
	return nil
}

// userData encodes the bootstrap and provisioning user-data with the credentials substituted.
func (r *Reconciler) userData(ctx context.Context, st *state) (map[abi.Stage][]byte, error) {
	auth, err := r.RegistryAuth(ctx)
	if err != nil {
		return nil, err
	}
	values := render.SecretValues{
		BootstrapToken:    st.bootstrapToken.Value,
		ProvisioningToken: st.bootstrapToken.Value,
		RegistryAuth:      auth,
		Plugin:            st.pluginSecrets,
	}
	userData := map[abi.Stage][]byte{}
	start := time.Now()
	defer func() { st.renderTook += time.Since(start) }()
	for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
		data, err := st.output.UserData(ctx, stage, values)
		if err != nil {
			return nil, r.renderFailure(ctx, err)
		}
		userData[stage] = data
	}
	st.bootstrapSize, st.provisioningSize = len(userData[abi.StageBootstrap]), len(userData[abi.StageProvisioning])
	return userData, nil
}

// writeOutputs writes the user-data Secrets, each only if it differs from what is there, the reader
// RoleBinding when the token changed, and the OSC, in two rounds: the provisioning Secret and the binding
// that lets the token read it first (a machine created from a new bootstrap Secret must find its
// provisioning data there and readable), then the bootstrap Secret and the OSC. A failure fails the
// reconcile, which the next one repeats (each write is skipped when already current).
func (r *Reconciler) writeOutputs(ctx context.Context, st *state) error {
	userData, err := r.userData(ctx, st)
	if err != nil {
		return err
	}
	ann := r.annotations(st)
	first := []func() error{func() error {
		return r.writeSecret(ctx, st, st.provisioning, render.ProvisioningSecretName(st.md),
			map[string][]byte{render.CloudConfigKey: userData[abi.StageProvisioning]}, withPluginSecretsHash(st, ann))
	}}
	if st.kubeletSecret {
		first = append(first, func() error {
			return r.writeSecret(ctx, st, st.kubeletBoot, render.KubeletBootstrapSecretName(st.md),
				map[string][]byte{KeyKubeconfig: []byte(r.kubeletKubeconfig(st))}, ann)
		})
	}
	if st.bindReader {
		first = append(first, func() error {
			return failure.FromCredentials(r.bindReader(ctx, st))
		})
	}
	if err := parallel.Do(first...); err != nil {
		return err
	}
	return parallel.Do(func() error {
		return r.writeSecret(ctx, st, st.bootstrap, render.BootstrapSecretName(st.md), map[string][]byte{
			render.CloudConfigKey: userData[abi.StageBootstrap], KeyProvisioningToken: []byte(st.bootstrapToken.Value)}, ann)
	}, func() error {
		return r.writeConfig(ctx, st)
	})
}

// writeSecret creates the Secret name, or updates current (with its resourceVersion) when it differs.
func (r *Reconciler) writeSecret(ctx context.Context, st *state, current *corev1.Secret, name string, data map[string][]byte, ann map[string]string) error {
	expect := func(err error) {
		st.expect(err, expectation{cache: r.Worker, before: versionOf(current),
			obj: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Settings.CloudInitSettingsNamespace, Name: name}}})
	}
	if current == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Settings.CloudInitSettingsNamespace, Name: name, Annotations: maps.Clone(ann)},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		credentials.Mark(st.md, s)
		err := r.Worker.Create(ctx, s)
		expect(err)
		if err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", s.Namespace, name, err)
		}
		st.noteWrote("Secret " + name)
		return nil
	}
	sameData := maps.EqualFunc(current.Data, data, bytes.Equal)
	if sameData && containsAll(current.Annotations, ann) && credentials.Marked(st.md, current) {
		return nil
	}
	if !sameData && current.Immutable != nil && *current.Immutable {
		return r.replaceImmutable(ctx, st, current, data, ann, expect)
	}
	updated := current.DeepCopy()
	updated.Data = data
	if updated.Annotations == nil {
		updated.Annotations = make(map[string]string, len(ann))
	}
	maps.Copy(updated.Annotations, ann)
	credentials.Mark(st.md, updated)
	err := r.Worker.Update(ctx, updated)
	expect(err)
	if err != nil {
		return fmt.Errorf("updating Secret %s/%s: %w", current.Namespace, name, err)
	}
	st.noteWrote("Secret " + name)
	return nil
}

// containsAll reports whether have has every key of want with want's value.
func containsAll(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// replaceImmutable replaces an immutable Secret whose data must change, the way upstream OSM v1.x rotates the
// user-data Secrets it writes with `immutable: true`: delete, then create. The API server refuses any update of
// an immutable Secret's data, so an update would fail on every reconcile. The delete is conditional on the UID
// and resourceVersion read (a Secret rewritten meanwhile is not lost: the delete fails as Outdated and the next
// reconcile reads it again), and the create follows at once, so machine-controller finds no Secret only for
// one round trip. A create that meets a Secret (someone wrote one in that window) fails as Outdated too. Only
// the data is immutable: a Secret whose data is already right keeps its object and gets its metadata updated.
// The replacement is a plain Secret: OSM updates its own in place.
func (r *Reconciler) replaceImmutable(ctx context.Context, st *state, current *corev1.Secret, data map[string][]byte, ann map[string]string, expect func(error)) error {
	uid, rv := current.UID, current.ResourceVersion
	if err := r.Worker.Delete(ctx, current, client.Preconditions{UID: &uid, ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
		expect(err)
		return fmt.Errorf("replacing immutable Secret %s/%s: %w", current.Namespace, current.Name, err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: current.Namespace, Name: current.Name, Labels: maps.Clone(current.Labels),
			Annotations: maps.Clone(current.Annotations)},
		Type: current.Type,
		Data: data,
	}
	if s.Annotations == nil {
		s.Annotations = make(map[string]string, len(ann))
	}
	maps.Copy(s.Annotations, ann)
	credentials.Mark(st.md, s)
	err := r.Worker.Create(ctx, s)
	expect(err)
	if err != nil {
		return fmt.Errorf("creating Secret %s/%s in place of an immutable one: %w", s.Namespace, s.Name, err)
	}
	st.noteWrote("Secret " + s.Name + " (replaced an immutable one)")
	return nil
}
