package plugin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/runtime"
)

// Pulls run in the background, so that a slow or stalled registry holds neither a reconcile worker nor
// anyone else: Resolve starts (or joins) the pull of an image, waits for it a moment (PendingAfter), and
// otherwise returns a PendingError the caller retries. Pulls of the same image with the same credentials
// are shared; at most MaxConcurrentPulls run at once, each within PullTimeout.

// ErrPending matches (errors.Is) a PendingError.
var ErrPending = errors.New("plugin pending")

// PendingError says a plugin image is still being pulled. Retrying later finds it loaded, or its failure.
type PendingError struct {
	Image string
	// For is how long the pull has been under way (or waiting for its turn).
	For time.Duration
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("plugin image %s is still being pulled (for %s); retrying when it is ready", e.Image, e.For.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrPending) true.
func (e *PendingError) Is(target error) bool { return target == ErrPending }

// RetryAfter is when to look again.
func (e *PendingError) RetryAfter() time.Duration { return pendingRetry }

const pendingRetry = 2 * time.Second

// failureRetention is how long a failed pull's error is handed out before the next resolution pulls again,
// so that callers told "pending" find out why it failed.
const failureRetention = 30 * time.Second

type waitKey struct{}

// WaitForPulls returns a context whose resolutions wait for image pulls (each bounded by PullTimeout) instead
// of reporting them pending: for admission reviews and the CLI, which have a caller waiting for the answer.
func WaitForPulls(ctx context.Context) context.Context {
	return context.WithValue(ctx, waitKey{}, true)
}

func waitsForPulls(ctx context.Context) bool { b, _ := ctx.Value(waitKey{}).(bool); return b }

// pullKey identifies a pull: the pinned reference, the credentials and what verified it. An image pulled with
// one namespace's pull Secret is served to a reference with other credentials only after a pull with those
// succeeded; one pulled under no verification (or another policy) is served to a reference its policy covers
// only after that policy's Verifier passed it.
type pullKey struct {
	image string
	creds [sha256.Size]byte
	trust string
}

func keyOf(ref Reference) pullKey {
	k := pullKey{image: ref.Image, creds: sha256.Sum256(ref.PullSecret)}
	if ref.Verify != nil {
		k.trust = ref.Verify.Key()
	}
	return k
}

// Verifier checks a pulled image before its module is loaded (package signature implements it with the
// operator's signature policy): a refused module reaches neither a plugin host nor a compiler.
type Verifier interface {
	// Key identifies what the verifier trusts (policy, rule, keys).
	Key() string
	// Verify returns an error to refuse art, which client pulled.
	Verify(ctx context.Context, client *oci.Client, art *oci.Artifact) error
}

// pulls holds the pulls under way, the recent failures, and the images pulled so far.
type pulls struct {
	sem     chan struct{}
	jobs    map[pullKey]*pullJob
	pulled  map[pullKey]pluginhost.Module
	running sync.WaitGroup
}

type pullJob struct {
	done    chan struct{}
	started time.Time
	ended   time.Time
	err     error
}

func (p *pulls) init(concurrency int) {
	p.sem = make(chan struct{}, concurrency)
	p.jobs = map[pullKey]*pullJob{}
	p.pulled = map[pullKey]pluginhost.Module{}
}

func (p *pulls) wait() { p.running.Wait() }

// maxRememberedPulls bounds the pulled-images table; beyond it, entries are dropped and pulled again
// (from the disk cache) when needed.
const maxRememberedPulls = 4096

// imageModule returns the module of an image reference, pulled (and loaded once) with ref's credentials. The
// module need not be loaded now: a host that lacks it (stopped idle, evicted) loads it again from the bytes
// the module reads back (imageBytes). Asking a host whether it still has the module instead made a pull that
// outlasted the idle timeout start over at every retry: loaded, stopped idle before the retry came, pulled
// again.
func (m *Manager) imageModule(ctx context.Context, ref Reference) (pluginhost.Module, error) {
	key := keyOf(ref)
	for range 2 {
		m.mu.Lock()
		src, ok := m.pulls.pulled[key]
		m.mu.Unlock()
		if ok {
			if err := m.host.Failed(src.Digest); err != nil {
				return pluginhost.Module{}, err
			}
			return src, nil
		}
		if err := m.awaitPull(ctx, key, ref); err != nil {
			return pluginhost.Module{}, err
		}
	}
	// The pull succeeded and its entry is already gone: only past maxRememberedPulls distinct images.
	return pluginhost.Module{}, &PendingError{Image: ref.Image}
}

// imageBytes reads the module of a pulled image again for a host that must load it anew: from the disk cache
// where there is one (the reference is pinned, so no registry is asked what it points to), else from the
// registry, with the credentials of the pull that verified it, and checked against the digest loaded then.
func (m *Manager) imageBytes(client *oci.Client, image, digest string) func() ([]byte, func(), error) {
	return func() ([]byte, func(), error) {
		art, err := client.Pull(m.ctx, image)
		if err != nil {
			return nil, nil, fmt.Errorf("plugin image %s: reading its module again: %w", image, err)
		}
		if d := runtime.Digest(art.Module); d != digest {
			return nil, nil, fmt.Errorf("plugin image %s: its module now has digest %s, not %s", image, d, digest)
		}
		return art.Module, func() {}, nil
	}
}

// awaitPull starts or joins the pull of key and waits for it as the context allows.
func (m *Manager) awaitPull(ctx context.Context, key pullKey, ref Reference) error {
	job := m.startPull(key, ref)
	var pending <-chan time.Time
	if !waitsForPulls(ctx) {
		t := time.NewTimer(m.cfg.Registry.PendingAfter)
		defer t.Stop()
		pending = t.C
	}
	select {
	case <-job.done:
		return job.err
	case <-pending:
		return &PendingError{Image: ref.Image, For: time.Since(job.started)}
	case <-ctx.Done():
		return fmt.Errorf("plugin image %s: waiting for the pull: %w", ref.Image, context.Cause(ctx))
	}
}

// startPull returns the job of key: the one under way, a recent failure, or a new one.
func (m *Manager) startPull(key pullKey, ref Reference) *pullJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	if job, ok := m.pulls.jobs[key]; ok {
		if job.ended.IsZero() || time.Since(job.ended) < failureRetention {
			return job
		}
	}
	job := &pullJob{done: make(chan struct{}), started: time.Now()}
	m.pulls.jobs[key] = job
	m.pulls.running.Add(1)
	go m.runPull(key, ref, job)
	return job
}

// runPull pulls and loads an image in the background, within PullTimeout for the pull, and records the
// result: the module (which reads its bytes back for a host that must load it again) on success, the error
// for failureRetention otherwise.
func (m *Manager) runPull(key pullKey, ref Reference, job *pullJob) {
	defer m.pulls.running.Done()
	src, err := m.pullAndLoad(key, ref, job)
	m.mu.Lock()
	job.err, job.ended = err, time.Now()
	if err == nil {
		delete(m.pulls.jobs, key)
		if len(m.pulls.pulled) >= maxRememberedPulls {
			for k := range m.pulls.pulled {
				delete(m.pulls.pulled, k)
				break
			}
		}
		m.pulls.pulled[key] = src
	}
	// Failures older than failureRetention would be replaced by the next startPull anyway; drop them now so
	// the table does not grow with references nobody asks for again.
	for k, j := range m.pulls.jobs {
		if !j.ended.IsZero() && time.Since(j.ended) >= failureRetention {
			delete(m.pulls.jobs, k)
		}
	}
	m.mu.Unlock()
	close(job.done)
}

func (m *Manager) pullAndLoad(key pullKey, ref Reference, job *pullJob) (pluginhost.Module, error) {
	name := ref.Image[:strings.LastIndex(ref.Image, "@")]
	select {
	case m.pulls.sem <- struct{}{}:
		defer func() { <-m.pulls.sem }()
	case <-m.ctx.Done():
		return pluginhost.Module{}, fmt.Errorf("plugin image %s: %w", ref.Image, m.ctx.Err())
	}
	client, err := m.client(ref.PullSecret)
	if err != nil {
		m.metrics.failures.WithLabelValues(name, string(ReasonPullError)).Inc()
		return pluginhost.Module{}, fmt.Errorf("plugin image %s: %w", ref.Image, err)
	}
	art, err := client.Pull(m.ctx, ref.Image)
	if err != nil {
		m.metrics.failures.WithLabelValues(name, string(ReasonPullError)).Inc()
		return pluginhost.Module{}, err
	}
	if ref.Verify != nil {
		if err := ref.Verify.Verify(m.ctx, client, art); err != nil {
			m.metrics.failures.WithLabelValues(name, "SignatureRefused").Inc()
			return pluginhost.Module{}, err
		}
	}
	if art.FromCache {
		m.metrics.cacheHits.WithLabelValues("oci").Inc()
	}
	m.log.V(1).Info("pulled plugin image", "image", ref.Image, "module", art.ModuleDigest.String(), "fromCache", art.FromCache,
		"seconds", time.Since(job.started).Seconds())
	digest := runtime.Digest(art.Module)
	src := pluginhost.Module{Name: name, Digest: digest, Namespace: ref.Namespace, Bytes: m.imageBytes(client, ref.Image, digest)}
	first := src // loads from the bytes in hand
	first.Bytes = func() ([]byte, func(), error) { return art.Module, func() {}, nil }
	if _, err := m.load(m.ctx, first); err != nil {
		return pluginhost.Module{}, err
	}
	return src, nil
}
