package plugin

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"sync"
	"sync/atomic"
)

// Plugins are deterministic: a module's export given the same request bytes returns the same output (they get
// no clock, randomness, network or files, and every call runs on a fresh instance). A Memo remembers decoded
// responses by sha256(module digest, export, request), so MachineDeployments whose requests are identical — the render
// pipeline hands plugins placeholders for credentials and for each MachineDeployment's name, namespace and
// revision, so neighbours differ in nothing else — cost one plugin call between them.
//
// It is an output memo, not a shared instance: no instance state crosses calls, only the response a call
// returned, and only after it decoded and passed the response's checks. Failed calls are never remembered.
// Remembering the decoded response, not its JSON, spares a hit the decode: a hit costs a deep copy (clone).
// A request that carries anything of its own (a plugin that asked for the real names, other SSH keys) simply
// has another key. Requests hold placeholders, never credentials, so neither do the keys or the outputs.
//
// Bounded by entries and by the bytes of the outputs the responses were decoded from, least recently used
// first out; a hit returns a deep copy. Concurrent calls with the
// same key wait for the first instead of running the plugin each (a controller starting with hundreds of
// MachineDeployments and ten workers would otherwise run the same render ten times over).
type Memo struct {
	maxEntries int
	maxBytes   int64

	mu       sync.Mutex
	entries  map[memoKey]*list.Element
	lru      list.List // of *memoEntry, most recently used first
	bytes    int64
	inflight map[memoKey]chan struct{}

	hits, misses atomic.Uint64
	// waiting, if set, is called when a call starts waiting for another with the same key (tests order
	// goroutines with it).
	waiting func()
}

// Defaults of the output memo every Manager starts with.
const (
	// DefaultMemoEntries bounds the outputs remembered: two per distinct configuration (bootstrap and
	// provisioning), so a few hundred distinct configurations.
	DefaultMemoEntries = 512
	// DefaultMemoBytes bounds the bytes of the outputs remembered. A default plugin's provisioning output is
	// 20 to 40 KiB of JSON.
	DefaultMemoBytes = 8 << 20
)

// MemoEnv turns the output memo off when set to "off" (or "0", "false"): for comparisons
// (OSM_BENCH_OURS_ENV="OSM_PLUGIN_OUTPUT_MEMO=off").
const MemoEnv = "OSM_PLUGIN_OUTPUT_MEMO"

type memoKey [sha256.Size]byte

type memoEntry struct {
	key memoKey
	// resp is a pointer to the decoded response, which no caller holds (put and get copy it).
	resp any
	// size is the length of the output resp was decoded from: what the byte bound counts.
	size int64
}

// NewMemo returns a memo bounded by maxEntries outputs and maxBytes bytes of them; nil (no memo) when either is
// not positive.
func NewMemo(maxEntries int, maxBytes int64) *Memo {
	if maxEntries <= 0 || maxBytes <= 0 {
		return nil
	}
	return &Memo{maxEntries: maxEntries, maxBytes: maxBytes, entries: map[memoKey]*list.Element{}, inflight: map[memoKey]chan struct{}{}}
}

func newMemoKey(digest, export string, req []byte) memoKey {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(digest), []byte(export), req} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var k memoKey
	h.Sum(k[:0])
	return k
}

// MemoStats are a memo's counters.
type MemoStats struct {
	Hits, Misses uint64
	Entries      int
	Bytes        int64
}

// Stats returns the memo's counters; zero for nil.
func (c *Memo) Stats() MemoStats {
	if c == nil {
		return MemoStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return MemoStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Entries: len(c.entries), Bytes: c.bytes}
}

// get returns a copy of the response remembered for key.
func (c *Memo) get(key memoKey) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(key)
}

func (c *Memo) getLocked(key memoKey) (any, bool) {
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return clone(el.Value.(*memoEntry).resp), true
}

// put remembers a copy of resp, decoded from outputSize bytes, for key, evicting the least recently used
// responses beyond the bounds. One whose output was larger than a quarter of the byte bound is not
// remembered: it would push out many others.
func (c *Memo) put(key memoKey, resp any, outputSize int) {
	size := int64(outputSize) + int64(len(key))
	if size > c.maxBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.lru.MoveToFront(el)
		return
	}
	c.entries[key] = c.lru.PushFront(&memoEntry{key: key, resp: clone(resp), size: size})
	c.bytes += size
	for len(c.entries) > c.maxEntries || c.bytes > c.maxBytes {
		last := c.lru.Back()
		e := last.Value.(*memoEntry)
		c.lru.Remove(last)
		delete(c.entries, e.key)
		c.bytes -= e.size
	}
}

// memoCall is one call's use of the memo: a remembered response (hit), or the duty to compute it, whose result
// keep remembers, and end hands to the calls that waited for it.
type memoCall struct {
	c    *Memo
	key  memoKey
	resp any
	hit  bool
	lead chan struct{} // closed by end when this call computed for others
}

// begin looks key up. On a hit call.resp is a copy of the response. Otherwise the caller runs the plugin,
// calls keep with a response that decoded and checked, and end in any case. When another call is computing the same
// key, begin waits for it (or for ctx) first; if that call failed, the caller runs the plugin itself.
func (c *Memo) begin(ctx context.Context, digest, export string, req []byte) *memoCall {
	if c == nil {
		return &memoCall{}
	}
	mc := &memoCall{c: c, key: newMemoKey(digest, export, req)}
	c.mu.Lock()
	if resp, ok := c.getLocked(mc.key); ok {
		c.mu.Unlock()
		c.hits.Add(1)
		mc.resp, mc.hit = resp, true
		return mc
	}
	wait, busy := c.inflight[mc.key]
	if !busy {
		mc.lead = make(chan struct{})
		c.inflight[mc.key] = mc.lead
	}
	c.mu.Unlock()
	if busy {
		if c.waiting != nil {
			c.waiting()
		}
		select {
		case <-wait:
			if resp, ok := c.get(mc.key); ok {
				c.hits.Add(1)
				mc.resp, mc.hit = resp, true
				return mc
			}
		case <-ctx.Done():
		}
	}
	c.misses.Add(1)
	return mc
}

// keep remembers the response of a call that missed, decoded from outputSize bytes.
func (mc *memoCall) keep(resp any, outputSize int) {
	if mc.c != nil && !mc.hit {
		mc.c.put(mc.key, resp, outputSize)
	}
}

// end releases the calls waiting for this one.
func (mc *memoCall) end() {
	if mc.lead == nil {
		return
	}
	mc.c.mu.Lock()
	delete(mc.c.inflight, mc.key)
	mc.c.mu.Unlock()
	close(mc.lead)
	mc.lead = nil
}

// newManagerMemo is the output memo a new Manager starts with: nil when MemoEnv turns memoisation off.
func newManagerMemo() *Memo {
	switch os.Getenv(MemoEnv) {
	case "off", "0", "false":
		return nil
	}
	return NewMemo(DefaultMemoEntries, DefaultMemoBytes)
}

// Memo returns the Manager's output memo (nil when off).
func (m *Manager) Memo() *Memo { return m.memo.Load() }

// SetMemo replaces the Manager's output memo; nil turns memoisation off (every call runs the plugin).
func (m *Manager) SetMemo(c *Memo) { m.memo.Store(c) }
