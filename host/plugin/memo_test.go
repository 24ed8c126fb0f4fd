package plugin

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
)

// memoResp stands for a decoded response: a string, and references a copy must not share.
type memoResp struct {
	Out   string
	Files map[string][]string
}

func resp(s string) *memoResp { return &memoResp{Out: s, Files: map[string][]string{"f": {s}}} }

func TestMemoBoundsAndCopies(t *testing.T) {
	c := NewMemo(3, 1<<20)
	key := func(i int) memoKey { return newMemoKey("sha256:d", "osm_render", []byte(fmt.Sprint(i))) }
	for i := range 3 {
		c.put(key(i), resp(fmt.Sprint("out", i)), 4)
	}
	if _, ok := c.get(key(0)); !ok { // 0 is now the most recently used
		t.Fatal("entry 0 missing")
	}
	c.put(key(3), resp("out3"), 4)
	if _, ok := c.get(key(1)); ok {
		t.Error("the least recently used entry survived the entry bound")
	}
	for _, i := range []int{0, 2, 3} {
		if _, ok := c.get(key(i)); !ok {
			t.Errorf("entry %d evicted", i)
		}
	}
	got, _ := c.get(key(0))
	got.(*memoResp).Out = "X"
	got.(*memoResp).Files["f"][0] = "X"
	got.(*memoResp).Files["g"] = nil
	if again, _ := c.get(key(0)); !reflect.DeepEqual(again, resp("out0")) {
		t.Errorf("a caller changed the remembered response: %+v", again)
	}
	kept := resp("kept")
	c.put(key(5), kept, 4)
	kept.Files["f"][0] = "X"
	if again, _ := c.get(key(5)); !reflect.DeepEqual(again, resp("kept")) {
		t.Errorf("the caller that computed a response changed what the memo kept: %+v", again)
	}
	if newMemoKey("sha256:d", "osm_render", []byte("1")) == newMemoKey("sha256:e", "osm_render", []byte("1")) ||
		newMemoKey("sha256:d", "osm_render", []byte("1")) == newMemoKey("sha256:d", "osm_encode", []byte("1")) ||
		newMemoKey("ab", "c", nil) == newMemoKey("a", "bc", nil) {
		t.Error("keys of different modules, exports or splits collide")
	}

	// The byte bound counts the outputs the responses were decoded from: 5 outputs of 100 bytes (plus their
	// keys) in 600 bytes leave 4.
	b := NewMemo(100, 600)
	for i := range 4 {
		b.put(key(i), resp("x"), 100)
	}
	if st := b.Stats(); st.Entries != 4 || st.Bytes > 600 {
		t.Errorf("stats %+v", st)
	}
	b.put(key(4), resp("x"), 100)
	if st := b.Stats(); st.Bytes > 600 || st.Entries != 4 {
		t.Errorf("over the byte bound: %+v", st)
	}
	b.put(key(9), resp("x"), 200) // more than a quarter of the bound: not remembered
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
	call := func(c *Memo, fail bool, began chan<- struct{}, release <-chan struct{}) (any, bool) {
		mc := c.begin(context.Background(), "d", "osm_render", []byte("req"))
		defer mc.end()
		if mc.hit {
			return mc.resp, true
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
		mc.keep(resp("out"), 3)
		return resp("out"), false
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
	if out, hit := call(c, false, nil, nil); !hit || !reflect.DeepEqual(out, resp("out")) {
		t.Errorf("later call: %+v hit %t", out, hit)
	}

	runs.Store(0)
	release, done = lead(NewMemo(10, 1<<20), true, 1) // the follower waits for the failing call, then runs itself
	close(release)
	done.Wait()
	if n := runs.Load(); n != 2 {
		t.Errorf("after a failed call the waiting one ran %d calls in all, want 2", n)
	}
}

// TestClonesShareNothing: the ABI's responses have no unexported fields (which a clone would share), and a
// clone of a response shares no slice or map with it.
func TestClonesShareNothing(t *testing.T) {
	for _, v := range []any{abi.RenderResponse{}, abi.ValidateResponse{}, abi.EncodeResponse{}} {
		checkExported(t, reflect.TypeOf(v), map[reflect.Type]bool{})
	}
	orig := &abi.RenderResponse{ABIVersion: abi.Version, Warnings: []string{"w"}, Config: abi.NodeConfig{
		Files: []abi.File{{Path: "/etc/a", Content: abi.FileContent{Inline: &abi.FileContentInline{Data: "a"}}}}}}
	c := clone(orig).(*abi.RenderResponse)
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("clone %+v differs from %+v", c, orig)
	}
	c.Warnings[0], c.Config.Files[0].Content.Inline.Data = "changed", "changed"
	if orig.Warnings[0] != "w" || orig.Config.Files[0].Content.Inline.Data != "a" {
		t.Errorf("a change to the clone reached the original: %+v", orig)
	}
}

func checkExported(t *testing.T, typ reflect.Type, seen map[reflect.Type]bool) {
	t.Helper()
	if seen[typ] {
		return
	}
	seen[typ] = true
	switch typ.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		checkExported(t, typ.Elem(), seen)
	case reflect.Map:
		checkExported(t, typ.Key(), seen)
		checkExported(t, typ.Elem(), seen)
	case reflect.Struct:
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				t.Errorf("%s.%s is unexported: a clone would share it", typ, f.Name)
			}
			checkExported(t, f.Type, seen)
		}
	case reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		t.Errorf("%s holds a %s, which a clone cannot copy", typ, typ.Kind())
	}
}
