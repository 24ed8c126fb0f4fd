package plugin

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestMemoBoundsAndCopies(t *testing.T) {
	c := NewMemo(3, 1<<20)
	key := func(i int) memoKey { return newMemoKey("sha256:d", "osm_render", []byte(fmt.Sprint(i))) }
	for i := range 3 {
		c.put(key(i), []byte(fmt.Sprint("out", i)))
	}
	if _, ok := c.get(key(0)); !ok { // 0 is now the most recently used
		t.Fatal("entry 0 missing")
	}
	c.put(key(3), []byte("out3"))
	if _, ok := c.get(key(1)); ok {
		t.Error("the least recently used entry survived the entry bound")
	}
	for _, i := range []int{0, 2, 3} {
		if _, ok := c.get(key(i)); !ok {
			t.Errorf("entry %d evicted", i)
		}
	}
	out, _ := c.get(key(0))
	out[0] = 'X'
	if again, _ := c.get(key(0)); string(again) != "out0" {
		t.Errorf("a caller changed the remembered output: %q", again)
	}
	if newMemoKey("sha256:d", "osm_render", []byte("1")) == newMemoKey("sha256:e", "osm_render", []byte("1")) ||
		newMemoKey("sha256:d", "osm_render", []byte("1")) == newMemoKey("sha256:d", "osm_encode", []byte("1")) ||
		newMemoKey("ab", "c", nil) == newMemoKey("a", "bc", nil) {
		t.Error("keys of different modules, exports or splits collide")
	}

	// The byte bound: 4 outputs of 100 bytes (plus their keys) in 600 bytes leave the 3 most recent.
	b := NewMemo(100, 600)
	for i := range 4 {
		b.put(key(i), make([]byte, 100))
	}
	if st := b.Stats(); st.Entries != 4 || st.Bytes > 600 {
		t.Errorf("stats %+v", st)
	}
	b.put(key(4), make([]byte, 100))
	if st := b.Stats(); st.Bytes > 600 || st.Entries != 4 {
		t.Errorf("over the byte bound: %+v", st)
	}
	b.put(key(9), make([]byte, 200)) // more than a quarter of the bound: not remembered
	if _, ok := b.get(key(9)); ok {
		t.Error("an output over a quarter of the byte bound was remembered")
	}
	if NewMemo(0, 1) != nil || NewMemo(1, 0) != nil {
		t.Error("a memo without room should be nil (off)")
	}
	var off *Memo
	if mc := off.begin(context.Background(), "d", "e", nil); mc.hit {
		t.Error("a nil memo hit")
	}
}

// Calls with the same key at once run the plugin once; a failed call is not remembered and lets the others run.
// The first call holds its result until every other has started waiting for it (Memo.waiting): no sleeps.
func TestMemoCoalescesConcurrentCalls(t *testing.T) {
	var runs atomic.Int32
	// call runs through c; a call that misses reports began, then waits for release before it returns.
	call := func(c *Memo, fail bool, began chan<- struct{}, release <-chan struct{}) ([]byte, bool) {
		mc := c.begin(context.Background(), "d", "osm_render", []byte("req"))
		defer mc.end()
		if mc.hit {
			return mc.out, true
		}
		runs.Add(1)
		if began != nil {
			close(began)
		}
		if release != nil {
			<-release
		}
		if fail {
			return nil, false
		}
		mc.keep([]byte("out"))
		return []byte("out"), false
	}
	// lead starts a call that misses and holds its result until release, once followers are waiting for it.
	lead := func(c *Memo, fail bool, followers int) (release chan struct{}, done *sync.WaitGroup) {
		var waiting sync.WaitGroup
		waiting.Add(followers)
		c.waiting = waiting.Done
		began, release, done := make(chan struct{}), make(chan struct{}), &sync.WaitGroup{}
		done.Go(func() { call(c, fail, began, release) })
		<-began
		for range followers {
			done.Go(func() { call(c, false, nil, nil) })
		}
		waiting.Wait()
		return release, done
	}

	c := NewMemo(10, 1<<20)
	release, done := lead(c, false, 7)
	close(release)
	done.Wait()
	if n := runs.Load(); n != 1 {
		t.Errorf("8 concurrent calls ran the plugin %d times, want 1", n)
	}
	if out, hit := call(c, false, nil, nil); !hit || string(out) != "out" {
		t.Errorf("later call: %q hit %t", out, hit)
	}

	runs.Store(0)
	release, done = lead(NewMemo(10, 1<<20), true, 1) // the follower waits for the failing call, then runs itself
	close(release)
	done.Wait()
	if n := runs.Load(); n != 2 {
		t.Errorf("after a failed call the waiting one ran %d calls in all, want 2", n)
	}
}
