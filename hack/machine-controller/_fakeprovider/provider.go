// This file is OSM's fake cloud provider for machine-controller, written in this repository. It replaces
// pkg/cloudprovider/provider/fake/provider.go in a checkout of kubermatic/machine-controller (checked at commit
// f1068332a) when `make e2e-machine-controller MACHINE_CONTROLLER_SRC=<checkout>` builds machine-controller
// (hack/machine-controller/build.sh): it is never compiled as part of OSM.
//
// Why it exists: the published fake provider reports every machine's instance as existing, so machine-controller
// never calls Create and no user-data ever reaches a provider. This one keeps instances in memory and logs what it
// is handed, so host/e2e/machinecontroller can read the user-data of each Machine from machine-controller's own
// log (-log-format JSON): the messages and field names below are the harness's contract
// (host/e2e/machinecontroller/harness_test.go: createdLine, deletedLine, providerIDPrefix).

package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"go.uber.org/zap"

	cloudprovidererrors "k8c.io/machine-controller/pkg/cloudprovider/errors"
	"k8c.io/machine-controller/pkg/cloudprovider/instance"
	cloudprovidertypes "k8c.io/machine-controller/pkg/cloudprovider/types"
	clusterv1alpha1 "k8c.io/machine-controller/sdk/apis/cluster/v1alpha1"
	"k8c.io/machine-controller/sdk/providerconfig"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The harness's contract.
const (
	msgCreated       = "fake provider created an instance"
	msgDeleted       = "fake provider deleted an instance"
	providerIDPrefix = "fake:///"
)

// The instances created, keyed by machine UID, for the life of the process: enough for a test run, and exactly
// what makes machine-controller call Create once per Machine. Package state, because machine-controller builds a
// new provider (New) for every machine it reconciles.
var (
	mu        sync.Mutex
	instances = map[types.UID]fakeInstance{}
)

type provider struct{}

// CloudProviderSpec is the fake provider's cloudProviderSpec, unchanged from the published provider.
type CloudProviderSpec struct {
	PassValidation bool `json:"passValidation"`
}

// fakeInstance is a running instance named after its machine, whose Node the harness registers with
// providerIDPrefix+name (machine-controller matches Nodes by provider ID).
type fakeInstance struct{ name string }

func (i fakeInstance) Name() string       { return i.name }
func (i fakeInstance) ID() string         { return i.name }
func (i fakeInstance) ProviderID() string { return providerIDPrefix + i.name }
func (i fakeInstance) Addresses() map[string]corev1.NodeAddressType {
	return map[string]corev1.NodeAddressType{i.name: corev1.NodeHostName}
}
func (i fakeInstance) Status() instance.Status { return instance.StatusRunning }

// New returns the fake cloud provider.
func New(_ providerconfig.ConfigVarResolver) cloudprovidertypes.Provider {
	return &provider{}
}

func (p *provider) AddDefaults(_ *zap.SugaredLogger, spec clusterv1alpha1.MachineSpec) (clusterv1alpha1.MachineSpec, error) {
	return spec, nil
}

// Validate passes or fails as the spec's passValidation says, as the published provider does.
func (p *provider) Validate(_ context.Context, _ *zap.SugaredLogger, spec clusterv1alpha1.MachineSpec) error {
	cfg, err := providerconfig.GetConfig(spec.ProviderSpec)
	if err != nil {
		return err
	}
	var s CloudProviderSpec
	if err := json.Unmarshal(cfg.CloudProviderSpec.Raw, &s); err != nil {
		return err
	}
	if !s.PassValidation {
		return fmt.Errorf("failing validation as requested")
	}
	return nil
}

// Get reports an instance only once Create made it, so machine-controller creates every Machine's instance.
func (p *provider) Get(_ context.Context, _ *zap.SugaredLogger, m *clusterv1alpha1.Machine, _ *cloudprovidertypes.ProviderData) (instance.Instance, error) {
	mu.Lock()
	defer mu.Unlock()
	i, ok := instances[m.UID]
	if !ok {
		return nil, cloudprovidererrors.ErrInstanceNotFound
	}
	return i, nil
}

// Create logs the user-data machine-controller hands over, which is what the harness checks.
func (p *provider) Create(_ context.Context, log *zap.SugaredLogger, m *clusterv1alpha1.Machine, _ *cloudprovidertypes.ProviderData, userdata string) (instance.Instance, error) {
	i := fakeInstance{name: m.Name}
	mu.Lock()
	instances[m.UID] = i
	mu.Unlock()
	log.Infow(msgCreated, "instance", m.Name, "machineUID", string(m.UID), "userdata", userdata)
	return i, nil
}

// Cleanup forgets the instance at once: deletion is complete when Cleanup returns true.
func (p *provider) Cleanup(_ context.Context, log *zap.SugaredLogger, m *clusterv1alpha1.Machine, _ *cloudprovidertypes.ProviderData) (bool, error) {
	mu.Lock()
	_, ok := instances[m.UID]
	delete(instances, m.UID)
	mu.Unlock()
	if ok {
		log.Infow(msgDeleted, "instance", m.Name, "machineUID", string(m.UID))
	}
	return true, nil
}

func (p *provider) MigrateUID(_ context.Context, _ *zap.SugaredLogger, m *clusterv1alpha1.Machine, uid types.UID) error {
	mu.Lock()
	defer mu.Unlock()
	if i, ok := instances[m.UID]; ok {
		delete(instances, m.UID)
		instances[uid] = i
	}
	return nil
}

func (p *provider) MachineMetricsLabels(_ *clusterv1alpha1.Machine) (map[string]string, error) {
	return map[string]string{}, nil
}

func (p *provider) SetMetricsForMachines(_ clusterv1alpha1.MachineList) error { return nil }
