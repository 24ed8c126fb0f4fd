package app

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// rememberingMapper is the manager's REST mapper: controller-runtime's dynamic mapper, with the mappings it
// found remembered. The caches of several namespaces that OSM reads through ask, on every Get and List,
// whether the object's kind is namespaced, and the dynamic mapper answers that through one mapper per group
// version it has loaded, building a "no match" error for each that does not know the kind. In a start of 500
// MachineDeployments over five OSes (OSM_BENCH_PPROF_DIR, 2026-11-27) those lookups were 2.4% of the
// controller's CPU and 7% of the bytes it allocated (28 of 390 MB).
//
// Only found mappings are kept: a kind the API server does not serve yet is asked again, so a CRD installed
// later is found as before. A kept mapping stays until the process ends, as the dynamic mapper's own mappings
// do: it reloads a group only on a miss.
type rememberingMapper struct {
	meta.RESTMapper

	mu    sync.RWMutex
	found map[mappingKey]meta.RESTMapping
}

type mappingKey struct {
	gk       schema.GroupKind
	versions string
}

// newRememberingMapper is a manager.Options.MapperProvider.
func newRememberingMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &rememberingMapper{RESTMapper: m, found: map[mappingKey]meta.RESTMapping{}}, nil
}

// RESTMapping returns a copy of the remembered mapping, so that no caller can change another's.
func (m *rememberingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key := mappingKey{gk: gk, versions: strings.Join(versions, ",")}
	m.mu.RLock()
	found, ok := m.found[key]
	m.mu.RUnlock()
	if ok {
		return &found, nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.found[key] = *mapping
	m.mu.Unlock()
	return mapping, nil
}
