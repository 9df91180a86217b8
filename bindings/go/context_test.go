package dshsession

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// blocker is an observer that holds the call which caused a notice of one
// kind and session inside the library until released, so that a test sees
// a library call that is really in progress.
type blocker struct {
	kind    NoticeKind
	id      string
	entered chan struct{} // closed when the call is held
	release chan struct{} // close it to let the call go on
	once    sync.Once

	mu       sync.Mutex
	disposed map[string]chan struct{} // closed on NoticeDisposed of the id
}

func newBlocker(kind NoticeKind, id string, watch ...string) *blocker {
	b := &blocker{kind: kind, id: id, entered: make(chan struct{}), release: make(chan struct{}),
		disposed: map[string]chan struct{}{}}
	for _, w := range watch {
		b.disposed[w] = make(chan struct{})
	}
	return b
}

func (b *blocker) observe(n Notice) {
	if n.Kind == b.kind && n.SessionID == b.id {
		b.once.Do(func() {
			close(b.entered)
			<-b.release
		})
	}
	if n.Kind == NoticeDisposed {
		b.mu.Lock()
		if ch, ok := b.disposed[n.SessionID]; ok {
			close(ch)
			delete(b.disposed, n.SessionID)
		}
		b.mu.Unlock()
	}
}

func (b *blocker) watch(id string) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.disposed[id]
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// cancelWhileHeld starts call, waits until the blocker holds the library
// call, cancels its context and checks that call returns context.Canceled
// while the library call is still held.
func cancelWhileHeld(t *testing.T, b *blocker, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- call(ctx) }()
	waitFor(t, b.entered, "the library call to start")
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("want context.Canceled, got %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the Context call waited for the library call")
	}
}

func sqliteStore(t *testing.T) *Store {
	return mustOpenStore(t, Config{EventTypes: testTypes, Backend: SQLite, Path: filepath.Join(t.TempDir(), "s.db")})
}

// An already cancelled context: nothing is called, nothing is made.
func TestContextAlreadyDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st := sqliteStore(t)
	s := mustCreate(t, st, CreateOptions{ID: "src"})
	turn(t, s, 1)
	if got, err := OpenStoreContext(ctx, Config{}); got != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenStoreContext = %v, %v", got, err)
	}
	if err := s.FlushContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("FlushContext = %v", err)
	}
	if child, err := s.ForkContext(ctx, LastEvent, "child"); child != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("ForkContext = %v, %v", child, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := st.OpenContext(ctx, "src"); got != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenContext = %v, %v", got, err)
	}
	if got, err := st.OpenWindowedContext(ctx, "src", 0); got != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenWindowedContext = %v, %v", got, err)
	}
	list, err := st.List()
	if err != nil || len(list) != 1 || list[0].Header.ID != "src" {
		t.Fatalf("List = %+v, %v (a cancelled fork made a child?)", list, err)
	}
	// Nothing holds the session: a plain open succeeds.
	again, err := st.Open("src")
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
}

// With a live context the variants are the plain calls.
func TestContextCompletes(t *testing.T) {
	ctx := context.Background()
	st, err := OpenStoreContext(ctx, Config{Backend: SQLite, Path: filepath.Join(t.TempDir(), "s.db"), EventTypes: testTypes})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := mustCreate(t, st, CreateOptions{ID: "src"})
	turn(t, s, 1)
	if err := s.FlushContext(ctx); err != nil {
		t.Fatal(err)
	}
	child, err := s.ForkContext(ctx, LastEvent, "child")
	if err != nil || child.ID() != "child" {
		t.Fatalf("ForkContext = %v, %v", child, err)
	}
	child.Close()
	s.Close()
	for _, open := range []func() (*Session, error){
		func() (*Session, error) { return st.OpenContext(ctx, "child") },
		func() (*Session, error) { return st.OpenWindowedContext(ctx, "child", 100) },
	} {
		o, err := open()
		if err != nil {
			t.Fatal(err)
		}
		if ids := messageIDs(t, o); len(ids) != 2 {
			t.Fatalf("reopened child derives %v", ids)
		}
		o.Close()
	}
}

// Cancelled while the flush is inside the library: FlushContext returns at
// once, the flush completes afterwards.
func TestFlushContextCancelledWhileFlushing(t *testing.T) {
	st := sqliteStore(t)
	s := mustCreate(t, st, CreateOptions{ID: "f"})
	b := newBlocker(NoticeFlush, "f")
	mustSetObserver(t, st, b.observe)
	turn(t, s, 1)
	cancelWhileHeld(t, b, s.FlushContext)
	close(b.release)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := length(t, s); n != 6 {
		t.Fatalf("length %d", n)
	}
}

// Cancelled while the open is inside the library: OpenContext returns at
// once; the session opened in the background is closed, after which it
// opens again.
func TestOpenContextCancelledWhileOpening(t *testing.T) {
	for _, windowed := range []bool{false, true} {
		st := sqliteStore(t)
		s := mustCreate(t, st, CreateOptions{ID: "o"})
		turn(t, s, 1)
		mustAppend(t, s, "turn/start", map[string]int{"turn": 2}, nil) // left open: the open repairs it
		evs, err := s.Events(0, End)
		if err != nil {
			t.Fatal(err)
		}
		closers, err := RepairEvents(evs)
		if err != nil || len(closers) == 0 {
			t.Fatalf("RepairEvents = %v, %v", closers, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		b := newBlocker(NoticeCreated, "o", "o")
		mustSetObserver(t, st, b.observe)
		disposed := b.watch("o")
		cancelWhileHeld(t, b, func(ctx context.Context) error {
			var got *Session
			var err error
			if windowed {
				got, err = st.OpenWindowedContext(ctx, "o", 10)
			} else {
				got, err = st.OpenContext(ctx, "o")
			}
			if got != nil {
				t.Errorf("a cancelled open returned a session")
			}
			return err
		})
		close(b.release)
		waitFor(t, disposed, "the background open's session to be closed")
		o, err := st.Open("o")
		if err != nil {
			t.Fatalf("open after the cancelled open (windowed %v): %v", windowed, err)
		}
		if len(o.Repaired()) != 0 {
			t.Fatalf("the cancelled open did not make its repair durable: %d closers now", len(o.Repaired()))
		}
		// The background open wrote the closers (seqs from len(evs) on).
		after, err := o.Events(uint64(len(evs)), uint64(len(evs)+len(closers)))
		if err != nil || len(after) != len(closers) || after[0].Type != closers[0].Type {
			t.Fatalf("after the cancelled open: %+v, %v; want the closers %+v", after, err, closers)
		}
		o.Close()
	}
}

// Cancelled while the fork is inside the library: ForkContext returns at
// once; the child is made all the same and closed.
func TestForkContextCancelledWhileForking(t *testing.T) {
	st := sqliteStore(t)
	s := mustCreate(t, st, CreateOptions{ID: "p"})
	turn(t, s, 1)
	b := newBlocker(NoticeCreated, "kid", "kid")
	mustSetObserver(t, st, b.observe)
	disposed := b.watch("kid")
	cancelWhileHeld(t, b, func(ctx context.Context) error {
		child, err := s.ForkContext(ctx, LastEvent, "kid")
		if child != nil {
			t.Errorf("a cancelled fork returned a session")
		}
		return err
	})
	close(b.release)
	waitFor(t, disposed, "the background fork's child to be closed")
	kid, err := st.Open("kid")
	if err != nil {
		t.Fatal(err)
	}
	defer kid.Close()
	if h := kid.Header(); h.ParentSession != "p" {
		t.Fatalf("child header %+v", h)
	}
}

// A PostgreSQL server that accepts connections and never answers: the
// library's open waits for connect_timeout; OpenStoreContext returns when
// the context's deadline passes.
func TestOpenStoreContextDeadlineOnAHangingServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback listener: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	url := "postgresql://dsh@" + ln.Addr().String() + "/dsh?connect_timeout=5"
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	st, err := OpenStoreContext(ctx, Config{Backend: Postgres, URL: url})
	if st != nil {
		st.Close()
	}
	if errors.Is(err, ErrInvalidArgument) {
		t.Skipf("this library has no postgres backend: %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OpenStoreContext = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("OpenStoreContext returned after %v", d)
	}
	mu.Lock()
	n := len(conns)
	mu.Unlock()
	if n == 0 {
		t.Fatal("the library never connected: the open did not wait on the server")
	}
}

func TestDeriveSince(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		s := mustCreate(t, st, CreateOptions{})
		u1, a1 := turn(t, s, 1)
		first, err := s.DeriveSince(DeriveCursor{})
		if err != nil || first.Reset || first.Count != 2 || len(first.Messages) != 2 || first.Messages[0].ID != "u1" {
			t.Fatalf("first = %+v, %v", first, err)
		}
		turn(t, s, 2)
		second, err := s.DeriveSince(first.Cursor())
		if err != nil || second.Reset || second.Count != 4 || len(second.Messages) != 2 ||
			second.Messages[0].ID != "u2" || second.Messages[1].ID != "a2" {
			t.Fatalf("second = %+v, %v", second, err)
		}
		if none, err := s.DeriveSince(second.Cursor()); err != nil || none.Reset || len(none.Messages) != 0 {
			t.Fatalf("nothing new = %+v, %v", none, err)
		}
		mustAppend(t, s, "compaction/start", raw(`{"turn":null}`), nil)
		mustAppend(t, s, "user/message",
			raw(`{"id":"sum","role":"user","content":[{"type":"text","text":"summary"}],"source":{"kind":"compaction"}}`),
			Replace(u1, a1).From(u1, a1))
		mustAppend(t, s, "compaction/end", raw(`{"turn":null}`), nil)
		third, err := s.DeriveSince(second.Cursor())
		if err != nil || !third.Reset || third.Count != 3 || third.Generation == second.Generation {
			t.Fatalf("after a replace = %+v, %v", third, err)
		}
		var resetIDs []string
		for _, m := range third.Messages {
			resetIDs = append(resetIDs, m.ID)
		}
		if ids := messageIDs(t, s); !reflect.DeepEqual(ids, resetIDs) || ids[0] != "sum" {
			t.Fatalf("reset messages %v, Derive %v", resetIDs, ids)
		}
		// A cursor this session never gave out: the whole list.
		if odd, err := s.DeriveSince(DeriveCursor{Generation: 99, Count: 1}); err != nil || !odd.Reset || odd.Count != 3 {
			t.Fatalf("unknown cursor = %+v, %v", odd, err)
		}
	})
}

func TestDeriveEventMessage(t *testing.T) {
	st := mustOpenStore(t, Config{EventTypes: testTypes})
	s := mustCreate(t, st, CreateOptions{})
	turn(t, s, 1)
	evs, err := s.Events(0, End)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := s.Derive()
	var got []string
	for _, ev := range evs {
		m, err := DeriveEventMessage(ev)
		if err != nil {
			t.Fatalf("DeriveEventMessage(%s): %v", ev.Raw, err)
		}
		if m != nil {
			got = append(got, m.ID)
		}
	}
	if len(got) != 2 || got[0] != msgs[0].ID || got[1] != msgs[1].ID {
		t.Fatalf("per-event messages %v, derived %+v", got, msgs)
	}
	if m, err := DeriveEventMessage(evs[0]); m != nil || err != nil {
		t.Fatalf("turn/start gives %+v, %v", m, err)
	}
}
