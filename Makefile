# OSM — Operating System Manager. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

export GOFLAGS ?= -buildvcs=false
CONTROLLER_GEN ?= go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.22.0
GO_TEST_FLAGS ?= -race -count=1 -timeout 30m
BENCH_FLAGS ?= -run '^$$' -bench . -benchmem -count 5

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Main job and tests (the two commands of the README)

.PHONY: demo
demo: plugins ## Render a MachineDeployment's user-data offline with the embedded default profiles and plugins.
	go run ./cmd/osmctl render -f deploy/examples/machinedeployment-ubuntu.yaml --stage both

.PHONY: test
test: verify-generate lint plugins controlplane ## Everything CI runs: generated files, lint, unit, integration and node e2e tests.
	hack/install-deps.sh validate
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test $(GO_TEST_FLAGS) ./...
	cd sdk && go test $(GO_TEST_FLAGS) ./...
	cd sdk/examples/opensuse && go test $(GO_TEST_FLAGS) ./...
	$(MAKE) --no-print-directory e2e-node

.PHONY: e2e-node
e2e-node: plugins controlplane ## Boot real nodes (systemd-nspawn, needs root) from OSM's user-data against a real kube-apiserver.
	hack/install-deps.sh node-e2e
	hack/e2e-node/binaries.sh
	hack/e2e-node/rootfs.sh >/dev/null
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test -tags e2e -count=1 -timeout 60m -v $(E2E_FLAGS) ./host/e2e/

##@ Building

.PHONY: build
build: plugins ## Build osm-controller and osmctl into bin/.
	go build -o bin/ ./cmd/...

.PHONY: plugins
plugins: ## Build the default OS plugins to wasm (plugins/dist), skipping unchanged ones.
	hack/build-plugins.sh

.PHONY: controlplane
controlplane: ## Build kube-apiserver, etcd and kubectl from the Go module proxy into the cache (once).
	hack/control-plane.sh >/dev/null

##@ Code generation and checks

.PHONY: generate
generate: ## Regenerate deepcopy code and the CRD YAML from the API types.
	$(CONTROLLER_GEN) object paths=./crds/...
	$(CONTROLLER_GEN) crd paths=./crds/osm/... output:crd:artifacts:config=crds/bases
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true paths=./crds/cluster/... output:crd:artifacts:config=crds/external

.PHONY: verify-generate
verify-generate: ## Fail if the generated files are stale (compares a fresh generation with the working tree).
	@before="$$(mktemp -d)"; cp -r crds "$$before/"; \
	$(MAKE) --no-print-directory generate >/dev/null; \
	diff -r "$$before/crds" crds || { echo "generated files under crds/ were stale; they are regenerated now: review and commit"; rm -rf "$$before"; exit 1; }; \
	rm -rf "$$before"

.PHONY: lint
lint: ## gofmt, go vet and golangci-lint on both modules.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	cd sdk && go vet ./...
	"$$(hack/tools.sh golangci-lint)" run ./...
	cd sdk && "$$(../hack/tools.sh golangci-lint)" run --config ../.golangci.yml ./...
	cd sdk/examples/opensuse && go vet ./... && "$$(../../../hack/tools.sh golangci-lint)" run --config ../../../.golangci.yml ./...

.PHONY: fuzz
fuzz: plugins ## Fuzz every parser of untrusted input for FUZZTIME each (default 30s); crashers land in testdata/fuzz.
	hack/fuzz.sh $(FUZZTIME)

##@ Measurements

.PHONY: bench-controller
bench-controller: plugins controlplane ## Drop-in controller (default profiles, warm plugin cache), OSM_BENCH_MDS (500) MDs: time, peak RSS, CPU, writes per MD.
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test ./host/app -run '^$$' -bench '^BenchmarkController$$' -benchtime 1x -timeout 60m -v

.PHONY: bench-compare
bench-compare: plugins controlplane ## Alternate this controller and UPSTREAM=/path/to/osm-controller on fresh control planes; medians and ratios.
	@test -n "$(UPSTREAM)" || { echo "usage: make bench-compare UPSTREAM=/path/to/osm-controller (see hack/bench/README.md)"; exit 1; }
	OSM_BENCH_UPSTREAM="$(abspath $(UPSTREAM))" KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test ./host/app -run '^$$' -bench '^BenchmarkCompare$$' -benchtime 1x -timeout 180m -v

.PHONY: bench-baseline
bench-baseline: plugins controlplane ## Alternate this controller and BASELINE=/path/to/an/earlier/osm-controller build of ours; medians and ratios.
	@test -n "$(BASELINE)" || { echo "usage: make bench-baseline BASELINE=/path/to/osm-controller (built from an earlier commit)"; exit 1; }
	OSM_BENCH_BASELINE="$(abspath $(BASELINE))" KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test ./host/app -run '^$$' -bench '^BenchmarkCompare$$' -benchtime 1x -timeout 180m -v

.PHONY: bench
bench: plugins ## Run the benchmarks (plugin runtime, render pipeline, default plugins) and print medians.
	go test $(BENCH_FLAGS) ./host/plugin/... ./host/render/... ./plugins/... | tee bench.out
	cd sdk && go test $(BENCH_FLAGS) ./... | tee ../bench-sdk.out
