package v1alpha1

// Condition types used in the status of OSM objects. Each condition's Reason is one of the documented
// constants below, so that alerts and scripts can match on it.
const (
	// ConditionReady is true when the object did everything it is for: for an OSP, its plugin is resolved and
	// its templates parse; for an OSC, its configuration rendered and both Secrets are written.
	ConditionReady = "Ready"
	// ConditionPluginResolved is true when the profile's plugin was found, verified and loaded.
	ConditionPluginResolved = "PluginResolved"
	// ConditionRendered is true when the configuration rendered without error.
	ConditionRendered = "Rendered"
	// ConditionSecretsWritten is true when the bootstrap and provisioning Secrets match the rendered output.
	ConditionSecretsWritten = "SecretsWritten"
	// ConditionDrifted is true when the machines of the MachineDeployment's current revision were provisioned
	// from a configuration other than the one OSM renders now (status.drift says since when and which inputs
	// changed; docs/drift.md). Reasons: ReasonConfigurationChanged (True), ReasonInSync (False).
	ConditionDrifted = "Drifted"
	// ConditionRollingOut says what OSM does about drift under the MachineDeployment's rollout policy
	// (osm.k8c.io/rollout-policy). True while a rollout OSM started is under way (ReasonRolloutInProgress);
	// False with ReasonRolloutQueued, ReasonRolloutWindowClosed, ReasonRolloutRenderNotReady
	// ReasonRolloutFinished or ReasonRolloutManual otherwise. Absent under the manual policy (the default) and
	// when there never was anything to roll out.
	ConditionRollingOut = "RollingOut"
)

// Reasons of the Drifted and RollingOut conditions.
const (
	// ReasonInSync means the machines of the current revision were provisioned from what OSM renders now.
	ReasonInSync = "InSync"
	// ReasonConfigurationChanged means a re-render without a new MachineDeployment revision changed the
	// configuration: only machines created from now on get it. The message names the inputs that changed.
	ReasonConfigurationChanged = "ConfigurationChanged"
	// ReasonRolloutManual means the rollout policy is manual (the default): OSM reports drift and does
	// nothing else; an operator rolls the machines (docs/drift.md). Written only where OSM had reported a
	// rollout state before (the policy was removed while a rollout waited).
	ReasonRolloutManual = "RolloutManual"
	// ReasonRolloutQueued means the policy is rollout and the MachineDeployment waits for one of the
	// -rollout-max-concurrent rollouts under way to finish.
	ReasonRolloutQueued = "RolloutQueued"
	// ReasonRolloutWindowClosed means the policy is rollout and the maintenance window
	// (osm.k8c.io/rollout-window or -rollout-window) is closed; the message says when it opens.
	ReasonRolloutWindowClosed = "RolloutWindowClosed"
	// ReasonRolloutRenderNotReady means the policy is rollout but the current configuration did not render
	// and write (Ready is not True): a rollout never starts for a render that failed.
	ReasonRolloutRenderNotReady = "RolloutRenderNotReady"
	// ReasonRolloutInProgress means OSM changed the MachineDeployment's template (annotation
	// osm.k8c.io/rollout in spec.template.metadata) and machine-controller replaces its machines.
	ReasonRolloutInProgress = "RolloutInProgress"
	// ReasonRolloutFinished means the rollout OSM started finished: every replica is updated and available.
	ReasonRolloutFinished = "RolloutFinished"
)

// Condition reasons.
const (
	// ReasonSucceeded means the step the condition describes completed.
	ReasonSucceeded = "Succeeded"
	// ReasonProgressing means work is under way and nothing has failed yet.
	ReasonProgressing = "Progressing"
	// ReasonPluginNotFound means a built-in plugin name is unknown or an OCI artifact does not exist.
	ReasonPluginNotFound = "PluginNotFound"
	// ReasonPluginPullFailed means the OCI registry could not be reached or refused the pull.
	ReasonPluginPullFailed = "PluginPullFailed"
	// ReasonPluginInvalid means the module is not a valid OSM plugin (bad wasm, wrong ABI, bad metadata).
	ReasonPluginInvalid = "PluginInvalid"
	// ReasonPluginFailed means the plugin trapped, panicked, timed out, ran out of memory or returned garbage.
	ReasonPluginFailed = "PluginFailed"
	// ReasonSignatureMissing means the plugin verification policy requires a signature of the plugin image and
	// its registry holds none (package host/signature); the module was never loaded.
	ReasonSignatureMissing = "SignatureMissing"
	// ReasonSignatureInvalid means the plugin image has signatures but none verifies against the authorities
	// the verification policy trusts for it (untrusted key, another digest, expired certificate); the module was
	// never loaded.
	ReasonSignatureInvalid = "SignatureInvalid"
	// ReasonTemplateError means a template failed to parse or execute.
	ReasonTemplateError = "TemplateError"
	// ReasonUnsupported means the profile does not support the MachineDeployment's OS, cloud provider or
	// provisioning utility.
	ReasonUnsupported = "Unsupported"
	// ReasonProfileNotFound means the profile the MachineDeployment names does not exist.
	ReasonProfileNotFound = "ProfileNotFound"
	// ReasonBootstrapTooLarge means the bootstrap user-data exceeds the provider limit.
	ReasonBootstrapTooLarge = "BootstrapTooLarge"
	// ReasonProvisioningTooLarge means the provisioning user-data exceeds what OSM writes into a Secret
	// (render.ProvisioningSizeLimit).
	ReasonProvisioningTooLarge = "ProvisioningTooLarge"
	// ReasonRenderFailed means rendering failed for a reason none of the others describe, such as missing
	// cluster information.
	ReasonRenderFailed = "RenderFailed"
	// ReasonWriteFailed means writing an object to the API server failed.
	ReasonWriteFailed = "WriteFailed"
	// ReasonSecretNameConflict means a user-data Secret the MachineDeployment needs exists and belongs to another
	// MachineDeployment. machine-controller's names ("<md>-<namespace>-bootstrap-config") are the same for
	// c/a-b and b-c/a; the first to render keeps them, the other gets this reason, an event naming the owner,
	// and no Secret and no node credential until the owner is gone.
	ReasonSecretNameConflict = "SecretNameConflict"
	// ReasonNameConflict means another object OSM needs for the MachineDeployment (a Role,
	// RoleBinding or Secret under a name OSM chose) exists and is not marked as the MachineDeployment's; it is
	// neither reused nor overwritten.
	ReasonNameConflict = "NameConflict"
	// ReasonPluginSecretMissing means a Secret or key the profile's spec.plugin.secrets refers to does not
	// exist (or the controller may not read it), or the names do not match the secrets the plugin declares
	// (configSchema options of type secret: a required one missing, an undeclared one given).
	// The message names the Secret and key, never a value; nothing is written, and the controller looks again
	// after a short pause, so creating the Secret is enough.
	ReasonPluginSecretMissing = "PluginSecretMissing"
	// ReasonInvalidMachineDeployment means a MachineDeployment field OSM renders from has a value no node could
	// use: a kubelet version that is not a version or outside the supported range, a percentage outside 0-100,
	// a quantity that does not parse. The message names the field.
	ReasonInvalidMachineDeployment = "InvalidMachineDeployment"
	// ReasonProfileNotAllowed means the MachineDeployment names a profile (k8c.io/operating-system-profile-namespace)
	// in a namespace it may not use: neither its own namespace, nor the controller's namespace (-namespace) for a
	// profile without spec.allowedNamespaces, nor a profile whose spec.allowedNamespaces lists the
	// MachineDeployment's namespace (docs/security.md, "Tenancy"). Nothing of the profile is rendered or read
	// (its plugin secrets, pull secret and extensions stay in its namespace); the message names the profile and
	// the namespace, and the MachineDeployment renders once the profile's owner allows the namespace.
	ReasonProfileNotAllowed = "ProfileNotAllowed"
	// ReasonSecretPlaceholderRefused means a contributor to the configuration (the profile's templates or
	// plugins, an extension's templates or plugins, a plugin's encoder) put a credential placeholder where it
	// may not go: a plugin secret's placeholder written by anyone but the plugin that declared it, outside the
	// provisioning stage, outside a file, or into a world-readable file; a cloud-config or registry credential
	// placeholder added to the bootstrap stage by anything but the profile's own templates and plugin
	// (docs/security.md, "Where credentials may go"). The message names the contributor and the file or place;
	// nothing is written.
	ReasonSecretPlaceholderRefused = "SecretPlaceholderRefused"
)
