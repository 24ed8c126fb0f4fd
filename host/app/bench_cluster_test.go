package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/osmhq/osm/host/testenv"
)

// benchCluster is a fresh control plane for one benchmark run: each run starts from an empty etcd, so neither
// controller finds what the other (or an earlier run) wrote.
type benchCluster struct {
	cfg        *rest.Config
	client     client.Client
	kubeconfig string
	env        *envtest.Environment
	// debugSocket serves kube-apiserver's /debug/pprof without authentication.
	debugSocket string
}

// startBenchCluster starts kube-apiserver and etcd with the given CRDs (objects, or YAML files in dirs).
func startBenchCluster(b *testing.B, crds []*apiextensionsv1.CustomResourceDefinition, dirs []string) *benchCluster {
	b.Helper()
	assets, err := testenv.AssetsDir()
	if err != nil {
		b.Fatalf("control plane binaries: %v", err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDs: crds, CRDDirectoryPaths: dirs,
		ErrorIfCRDPathMissing: true, Scheme: testenv.Scheme}
	// The API server's profiles, for OSM_BENCH_PPROF_DIR: a socket only this benchmark can reach.
	debugSocket := filepath.Join(b.TempDir(), "apiserver-debug.sock")
	env.ControlPlane.GetAPIServer().Configure().Set("debug-socket-path", debugSocket)
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		b.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	bc := &benchCluster{cfg: cfg, env: env, debugSocket: debugSocket}
	if bc.client, err = client.New(cfg, client.Options{Scheme: testenv.Scheme}); err != nil {
		bc.stop(b)
		b.Fatal(err)
	}
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "osm-bench-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		bc.stop(b)
		b.Fatal(err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		bc.stop(b)
		b.Fatal(err)
	}
	bc.kubeconfig = writeTemp(b, "kubeconfig", data)
	return bc
}

func (bc *benchCluster) stop(b *testing.B) {
	if err := bc.env.Stop(); err != nil {
		b.Logf("stopping control plane: %v", err)
	}
}

// prepare makes the cluster what a drop-in user has before starting the controller: the user-data namespace
// with upstream's cloud-init-getter-token Secret, kube-public/cluster-info, and n aws MachineDeployments dealt
// in turn over oses, each naming its default profile osp-<os> (the controller installs the profiles itself).
func (bc *benchCluster) prepare(b *testing.B, n int, oses []string) []string {
	b.Helper()
	ctx := context.Background()
	for _, ns := range []string{userDataNS, "kube-public"} {
		if err := bc.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			b.Fatal(err)
		}
	}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: userDataNS, Name: "cloud-init-getter-token"},
		Data: map[string][]byte{"token": []byte("bench-getter-token")}}
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n",
		bc.cfg.Host, b64(bc.cfg.CAData))
	info := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "cluster-info"}, Data: map[string]string{"kubeconfig": kubeconfig}}
	for _, o := range []client.Object{token, info} {
		if err := bc.client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	names := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		names[i] = fmt.Sprintf("md-%04d", i)
		osName := oses[i%len(oses)]
		md := newMD(b, names[i], osName, "aws", "osp-"+osName)
		if osName == "flatcar" {
			// Both controllers' osp-flatcar render Ignition, which is what the MachineDeployment asks for.
			md.Spec.Template.Spec.ProviderSpec.Value.Raw = []byte(strings.Replace(string(md.Spec.Template.Spec.ProviderSpec.Value.Raw),
				`"operatingSystemSpec":{}`, `"operatingSystemSpec":{"provisioningUtility":"ignition"}`, 1))
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs <- bc.client.Create(ctx, md)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return names
}

// bootstrapWatch counts the bootstrap Secrets of the given MachineDeployments as they appear, with one
// metadata-only watch (a list of the Secrets themselves would load the API server with megabytes per poll).
type bootstrapWatch struct {
	mu    sync.Mutex
	want  map[string]bool
	seen  map[string]bool
	first time.Time
	all   chan time.Time
}

func watchBootstrapSecrets(ctx context.Context, b *testing.B, cfg *rest.Config, mds []string) *bootstrapWatch {
	b.Helper()
	bw := &bootstrapWatch{want: map[string]bool{}, seen: map[string]bool{}, all: make(chan time.Time, 1)}
	for _, md := range mds {
		bw.want[md+"-kube-system-bootstrap-config"] = true
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	secrets := mc.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(userDataNS)
	list, err := secrets.List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			w, err := secrets.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(100 * time.Millisecond) // backoff before re-opening a refused watch, not ordering
				continue
			}
			for ev := range w.ResultChan() {
				if o, ok := ev.Object.(*metav1.PartialObjectMetadata); ok {
					rv = o.ResourceVersion
					if ev.Type == watch.Added || ev.Type == watch.Modified {
						bw.saw(o.Name)
					}
				}
			}
		}
	}()
	return bw
}

func (bw *bootstrapWatch) saw(name string) {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	if !bw.want[name] || bw.seen[name] {
		return
	}
	if len(bw.seen) == 0 {
		bw.first = time.Now()
	}
	bw.seen[name] = true
	if len(bw.seen) == len(bw.want) {
		bw.all <- time.Now()
	}
}

func (bw *bootstrapWatch) count() int {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	return len(bw.seen)
}

// apiServerMetrics reads the API server's own metrics: every request it served, by verb, resource and code,
// and the request body sizes. The controller is the only client writing while it runs, so differences of these
// counters are its writes, counted without a proxy in its path.
func apiServerMetrics(ctx context.Context, b *testing.B, cfg *rest.Config) []sample {
	b.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	return parseMetrics(string(raw), "apiserver_request_total", "apiserver_request_body_size_bytes_sum",
		"apiserver_request_duration_seconds_sum", "apiserver_request_duration_seconds_count")
}

// writeCounts are the mutating requests between two metric snapshots.
type writeCounts struct {
	total, conflicts int
	bytes            float64
	// seconds and timed are the API server's time serving the writes, and how many it timed.
	seconds, timed float64
	byKind         map[string]int // "POST secrets" -> count
	// reads are the other requests ("GET secrets" -> count): the API server's work for a controller is not
	// its writes alone.
	reads map[string]int
}

func diffWrites(before, after []sample) writeCounts {
	w := writeCounts{byKind: map[string]int{}, reads: map[string]int{}}
	base := map[string]float64{}
	for _, s := range before {
		base[s.key()] = s.value
	}
	for _, s := range after {
		d := s.value - base[s.key()]
		if d == 0 {
			continue
		}
		switch s.name {
		case "apiserver_request_total":
			verb := s.labels["verb"]
			// The API server renews its own identity lease; neither controller holds a lease (-leader-elect=false).
			if s.labels["resource"] == "leases" {
				continue
			}
			res := s.labels["resource"]
			if sub := s.labels["subresource"]; sub != "" {
				res += "/" + sub
			}
			if !isWriteVerb(verb) {
				w.reads[verb+" "+res] += int(d)
				continue
			}
			w.byKind[verb+" "+res] += int(d)
			w.total += int(d)
			if s.labels["code"] == "409" {
				w.conflicts += int(d)
			}
		case "apiserver_request_duration_seconds_sum", "apiserver_request_duration_seconds_count":
			if s.labels["resource"] == "leases" || !isWriteVerb(s.labels["verb"]) {
				continue
			}
			if s.name == "apiserver_request_duration_seconds_sum" {
				w.seconds += d
			} else {
				w.timed += d
			}
		case "apiserver_request_body_size_bytes_sum":
			if s.labels["resource"] != "leases" && isWriteVerb(strings.ToUpper(s.labels["verb"])) {
				w.bytes += d
			}
		}
	}
	return w
}

func isWriteVerb(v string) bool {
	switch v {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY", "CREATE", "UPDATE":
		return true
	}
	return false
}

// objectBytes is the JSON size of every object of a kind in a namespace: what an informer of that kind holds,
// before decoding.
func objectBytes(ctx context.Context, b *testing.B, cfg *rest.Config, path string) int {
	b.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath(path).DoRaw(ctx)
	if err != nil {
		return 0
	}
	return len(raw)
}

// controlPlanePIDs finds the cluster's kube-apiserver (by its debug socket, unique to this cluster) and the
// etcd it talks to (by the client URL the API server names).
func (bc *benchCluster) controlPlanePIDs() (apiserver, etcd int) {
	entries, _ := os.ReadDir("/proc")
	cmdlines := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdlines[pid] = strings.ReplaceAll(string(raw), "\x00", " ")
	}
	etcdURL := ""
	for pid, cmd := range cmdlines {
		if strings.Contains(cmd, bc.debugSocket) {
			apiserver = pid
			for _, arg := range strings.Fields(cmd) {
				if v, ok := strings.CutPrefix(arg, "--etcd-servers="); ok {
					etcdURL = v
				}
			}
		}
	}
	for pid, cmd := range cmdlines {
		if etcdURL != "" && pid != apiserver && strings.Contains(cmd, "etcd") && strings.Contains(cmd, etcdURL) {
			etcd = pid
		}
	}
	return apiserver, etcd
}

// controlPlaneCPU is the CPU time kube-apiserver and etcd have used so far.
func (bc *benchCluster) controlPlaneCPU() (apiserver, etcd time.Duration) {
	a, e := bc.controlPlanePIDs()
	if a != 0 {
		apiserver = cpuTime(a)
	}
	if e != 0 {
		etcd = cpuTime(e)
	}
	return apiserver, etcd
}
