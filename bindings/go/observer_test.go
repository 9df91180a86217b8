package dshsession

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder collects notices; safe for concurrent observers.
type recorder struct {
	mu      sync.Mutex
	notices []Notice
}

func (r *recorder) observe(n Notice) {
	r.mu.Lock()
	r.notices = append(r.notices, n)
	r.mu.Unlock()
}

func (r *recorder) all() []Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Notice(nil), r.notices...)
}

// take returns the notices so far and forgets them.
func (r *recorder) take() []Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	ns := r.notices
	r.notices = nil
	return ns
}

// summary is "id kind" per notice, plus "@seq type" for events.
func summary(ns []Notice) string {
	var b strings.Builder
	for _, n := range ns {
		fmt.Fprintf(&b, "%s %s", n.SessionID, n.Kind)
		if n.Event != nil {
			fmt.Fprintf(&b, " @%d %s", n.Event.Seq, n.Event.Type)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func wantNotices(t *testing.T, got []Notice, want ...string) {
	t.Helper()
	w := ""
	if len(want) > 0 {
		w = strings.Join(want, "\n") + "\n"
	}
	if summary(got) != w {
		t.Fatalf("notices:\n%s\nwant:\n%s", summary(got), w)
	}
}

func mustSetObserver(t *testing.T, st *Store, fn func(Notice)) {
	t.Helper()
	if err := st.SetObserver(fn); err != nil {
		t.Fatalf("SetObserver: %v", err)
	}
}

// Every kind of notice, with its session id and decoded payload: created
// (create, fork, open), event (append and batch, the event exactly as
// committed), flush, disposed. Seeds and repair closers are not published.
func TestObserverNotices(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, reopen func() *Store) {
		var rec recorder
		mustSetObserver(t, st, rec.observe)

		s, err := st.Create(CreateOptions{ID: "n", Cwd: "/w"})
		if err != nil {
			t.Fatal(err)
		}
		ns := rec.take()
		wantNotices(t, ns, "n created")
		if h := ns[0].Header; h == nil || h.ID != "n" || h.Cwd != "/w" || string(ns[0].Payload) != string(h.Raw) ||
			ns[0].Event != nil || ns[0].Flush != nil {
			t.Fatalf("created notice: %+v", ns[0])
		}

		ev := mustAppend(t, s, "turn/start", map[string]int{"turn": 1}, nil)
		ns = rec.take()
		wantNotices(t, ns, "n event @0 turn/start")
		if got := ns[0].Event; string(got.Raw) != string(ev.Raw) || string(ns[0].Payload) != string(ev.Raw) ||
			got.Time != ev.Time || ns[0].Header != nil {
			t.Fatalf("event notice %s, Append returned %s", ns[0].Payload, ev.Raw)
		}

		evs, err := s.AppendBatch([]BatchItem{
			{Type: "user/message", Data: userMsg("u1", "hi"), Intent: Append()},
			{Type: "step/start", Data: map[string]int{"turn": 1, "step": 1}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ns = rec.take()
		wantNotices(t, ns, "n event @1 user/message", "n event @2 step/start")
		for i := range evs {
			if string(ns[i].Event.Raw) != string(evs[i].Raw) || ns[i].Event.Op().Kind != evs[i].Op().Kind {
				t.Fatalf("batch notice %d: %s, committed %s", i, ns[i].Payload, evs[i].Raw)
			}
		}

		// Nothing is published for a refused append or a validate.
		if _, err := s.Append("user/message", userMsg("u2", "x"), Replace(5, 6)); err == nil {
			t.Fatal("replace of missing nodes accepted")
		}
		if _, err := s.Validate("test/note", nil, nil); err != nil {
			t.Fatal(err)
		}
		wantNotices(t, rec.take()) // none
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		ns = rec.take()
		wantNotices(t, ns, "n flush")
		if f := ns[0].Flush; f == nil || !f.OK || f.Rule != "" {
			t.Fatalf("flush notice: %s", ns[0].Payload)
		}

		mustAppend(t, s, "step/end", map[string]int{"turn": 1, "step": 1}, nil)
		mustAppend(t, s, "turn/end", raw(`{"turn":1,"reason":{"kind":"completed"}}`), nil)
		c, err := s.Fork(LastEvent, "n-child")
		if err != nil {
			t.Fatal(err)
		}
		// The child's seed (the parent's events and its end-seed marker) is
		// not published, only its creation.
		ns = rec.take()
		wantNotices(t, ns, "n event @3 step/end", "n event @4 turn/end", "n-child created")
		if h := ns[2].Header; h == nil || h.ParentSession != "n" || h.SeedLength == 0 {
			t.Fatalf("fork created notice: %s", ns[2].Payload)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, s, "turn/start", map[string]int{"turn": 2}, nil) // left open for repair
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		ns = rec.take()
		wantNotices(t, ns, "n-child disposed", "n event @5 turn/start", "n disposed")
		if ns[0].Payload != nil || ns[0].Header != nil || ns[0].Event != nil || ns[0].Flush != nil {
			t.Fatalf("disposed notice: %+v", ns[0])
		}

		// Open publishes created; the closers crash repair appends are not
		// events of the live session.
		if reopen != nil {
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			st = reopen()
			mustSetObserver(t, st, rec.observe)
		}
		s2, err := st.Open("n")
		if err != nil {
			t.Fatal(err)
		}
		if len(s2.Repaired()) == 0 {
			t.Fatal("nothing repaired")
		}
		ns = rec.take()
		wantNotices(t, ns, "n created")
		if ns[0].Header == nil || ns[0].Header.ID != "n" {
			t.Fatalf("open created notice: %s", ns[0].Payload)
		}
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
		wantNotices(t, rec.take(), "n disposed")
	})
}

// An observer runs inside the call that caused the notice and may read the
// session and its store; an append to that same session is refused with
// append.reentrant (the outer append stays committed), while an append to
// another session works.
func TestObserverReentrant(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		s := mustCreate(t, st, CreateOptions{ID: "r"})
		other := mustCreate(t, st, CreateOptions{ID: "other"})
		var (
			seen       []string
			reentrant  []error
			otherSeqs  []uint64
			sessions   = map[string]*Session{"r": s, "other": other}
			readsAfter []error
		)
		mustSetObserver(t, st, func(n Notice) {
			session := sessions[n.SessionID]
			switch {
			case n.Kind == NoticeEvent && n.SessionID == "r":
				in, err := session.Info()
				if err != nil {
					t.Errorf("Info from the observer: %v", err)
					return
				}
				evs, err := session.Events(n.Event.Seq, End)
				if err != nil || len(evs) != 1 || string(evs[0].Raw) != string(n.Event.Raw) {
					t.Errorf("Events(%d) from the observer: %v %v", n.Event.Seq, evs, err)
				}
				msgs, err := session.Derive()
				if err != nil {
					t.Errorf("Derive from the observer: %v", err)
				}
				if _, err := st.List(); err != nil {
					t.Errorf("Store.List from the observer: %v", err)
				}
				seen = append(seen, fmt.Sprintf("%s@%d length %d msgs %d", n.Event.Type, n.Event.Seq, in.Length, len(msgs)))
				_, err = session.Append("test/echo", nil, nil)
				reentrant = append(reentrant, err)
				// Another session of the store may be appended to.
				ev, err := other.Append("test/echo", map[string]uint64{"of": n.Event.Seq}, nil)
				if err != nil {
					t.Errorf("append to another session from the observer: %v", err)
				}
				otherSeqs = append(otherSeqs, ev.Seq)
			case n.Kind == NoticeDisposed:
				// Reached from inside Close: the handle is already closed,
				// and a call on it fails at once instead of waiting.
				_, err := session.Info()
				readsAfter = append(readsAfter, err)
			}
		})
		mustAppend(t, s, "turn/start", map[string]int{"turn": 1}, nil)
		mustAppend(t, s, "user/message", userMsg("u1", "hi"), Append())
		want := []string{"turn/start@0 length 1 msgs 0", "user/message@1 length 2 msgs 1"}
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("observer saw %q, want %q", seen, want)
		}
		if len(reentrant) != 2 {
			t.Fatalf("re-entrant appends: %v", reentrant)
		}
		for _, err := range reentrant {
			e := wantErr(t, err, ErrConflict, "append.reentrant")
			if e.Op != "Session.Append" || e.Raw == nil {
				t.Fatalf("re-entrant append error: %#v", e)
			}
		}
		if n := length(t, s); n != 2 {
			t.Fatalf("length %d after refused re-entrant appends, want 2", n)
		}
		if fmt.Sprint(otherSeqs) != "[0 1]" || length(t, other) != 2 {
			t.Fatalf("appends to the other session: %v", otherSeqs)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if len(readsAfter) != 1 {
			t.Fatalf("disposed notices: %v", readsAfter)
		}
		wantErr(t, readsAfter[0], ErrClosed, "handle.closed")
		mustSetObserver(t, st, nil)
	})
}

// SetObserver(nil) stops the notices, a new observer replaces the old one,
// and SetObserver on a closed store fails with ErrClosed.
func TestObserverRemoveAndReplace(t *testing.T) {
	st := mustOpenStore(t, Config{EventTypes: testTypes})
	var first, second recorder
	mustSetObserver(t, st, first.observe)
	s := mustCreate(t, st, CreateOptions{ID: "x"})
	mustAppend(t, s, "test/note", nil, nil)
	mustSetObserver(t, st, nil)
	mustAppend(t, s, "test/note", nil, nil)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	wantNotices(t, first.take(), "x created", "x event @0 test/note")

	mustSetObserver(t, st, first.observe)
	mustSetObserver(t, st, second.observe) // replaces first
	mustAppend(t, s, "test/note", nil, nil)
	wantNotices(t, first.take())
	wantNotices(t, second.take(), "x event @2 test/note")
	mustSetObserver(t, st, nil)
	mustSetObserver(t, st, nil) // removing twice is fine
	mustAppend(t, s, "test/note", nil, nil)
	wantNotices(t, second.take())

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, st.SetObserver(second.observe), ErrClosed, "handle.closed")
	wantErr(t, st.SetObserver(nil), ErrClosed, "handle.closed")
	var nilStore *Store
	wantErr(t, nilStore.SetObserver(nil), ErrClosed, "handle.closed")
}

// Sessions outlive their closed store, and so does the observer: it hears
// them until the last one is closed, and only then is its cgo.Handle
// released.
func TestObserverOutlivesStoreClose(t *testing.T) {
	st, err := OpenStore(Config{EventTypes: testTypes})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	mustSetObserver(t, st, rec.observe)
	a, err := st.Create(CreateOptions{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, a, "test/note", nil, nil)
	b, err := a.Fork(LastEvent, "b")
	if err != nil {
		t.Fatal(err)
	}
	obs := st.obs
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, b, "test/note", nil, nil)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	obs.mu.Lock()
	open, handle := obs.open, obs.handle
	obs.mu.Unlock()
	if open != 1 || handle == 0 {
		t.Fatalf("with one session open: open %d, handle %v", open, handle)
	}
	mustAppend(t, a, "test/note", nil, nil)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	wantNotices(t, rec.all(), "a created", "a event @0 test/note", "b created", "b event @2 test/note",
		"b disposed", "a event @1 test/note", "a disposed")
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.open != 0 || obs.handle != 0 || obs.fn != nil {
		t.Fatalf("after the last close: open %d, handle %v, fn set %v", obs.open, obs.handle, obs.fn != nil)
	}
}

// A panicking observer is contained: the panic is logged, the append that
// caused it is committed and returned, and later notices still arrive.
func TestObserverPanicIsLogged(t *testing.T) {
	var logged bytes.Buffer
	log.SetOutput(&logged)
	defer log.SetOutput(logWriter)
	st := mustOpenStore(t, Config{EventTypes: testTypes})
	s := mustCreate(t, st, CreateOptions{ID: "p"})
	calls := 0
	mustSetObserver(t, st, func(n Notice) {
		calls++
		if n.Event != nil && n.Event.Type == "test/boom" {
			panic("boom")
		}
	})
	ev, err := s.Append("test/boom", nil, nil)
	if err != nil || ev.Type != "test/boom" {
		t.Fatalf("append with a panicking observer: %v, %v", ev, err)
	}
	mustAppend(t, s, "test/note", nil, nil)
	if calls != 2 || length(t, s) != 2 {
		t.Fatalf("observer calls %d, length %d", calls, length(t, s))
	}
	out := logged.String()
	if !strings.Contains(out, `dshsession: the store observer panicked on a "event" notice of session "p": boom`) ||
		!strings.Contains(out, "observer_test.go") {
		t.Fatalf("log:\n%s", out)
	}
}

// logWriter is the standard logger's output, restored after a test.
var logWriter = log.Writer()

// Observers on many goroutines at once, with reads from inside them, and
// Close racing with those nested reads: every notice arrives, nothing
// deadlocks (a nested read fails with ErrClosed once Close has begun).
func TestConcurrentObserverAndClose(t *testing.T) {
	st := mustOpenStore(t, Config{EventTypes: testTypes})
	const sessions, each = 6, 30
	var (
		mu     sync.Mutex
		events = map[string]int{}
		closed int
	)
	byID := sync.Map{}
	mustSetObserver(t, st, func(n Notice) {
		v, _ := byID.Load(n.SessionID)
		s, _ := v.(*Session)
		if s != nil {
			// Give a Close on another goroutine time to begin between the
			// outer call and this nested one (with a sync.RWMutex, a
			// waiting writer would block the nested read: a deadlock).
			time.Sleep(100 * time.Microsecond)
			if _, err := s.Derive(); err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("Derive from the observer: %v", err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		switch n.Kind {
		case NoticeEvent:
			events[n.SessionID]++
		case NoticeDisposed:
			closed++
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for i := 0; i < sessions; i++ {
			i, id := i, fmt.Sprintf("c%d", i)
			s, err := st.Create(CreateOptions{ID: id})
			if err != nil {
				t.Error(err)
				return
			}
			byID.Store(id, s)
			wg.Add(3)
			for w := 0; w < 2; w++ {
				go func() {
					defer wg.Done()
					for k := 0; k < each; k++ {
						if _, err := s.Append("test/note", nil, nil); err != nil {
							if !errors.Is(err, ErrClosed) {
								t.Error(err)
							}
							return
						}
					}
				}()
			}
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * time.Millisecond)
				if err := s.Close(); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("deadlock: appends with observer reads and Close did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	if closed != sessions {
		t.Fatalf("%d disposed notices, want %d", closed, sessions)
	}
	for id, n := range events {
		v, _ := byID.Load(id)
		if n > 2*each || v == nil {
			t.Fatalf("%s: %d event notices", id, n)
		}
	}
}

// Sessions dropped without Close: their finalizers close them and publish
// NoticeDisposed from the finalizer goroutine, after the store itself was
// closed; the handle is released after the last one.
func TestGCObserverOfLeakedSessions(t *testing.T) {
	st, err := OpenStore(Config{EventTypes: testTypes})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	mustSetObserver(t, st, rec.observe)
	const n = 20
	func() {
		for i := 0; i < n; i++ {
			s, err := st.Create(CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			mustAppend(t, s, "test/note", nil, nil)
		}
	}()
	obs := st.obs
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	disposed := func() int {
		k := 0
		for _, x := range rec.all() {
			if x.Kind == NoticeDisposed {
				k++
			}
		}
		return k
	}
	waitUntil(t, "the leaked sessions to be finalized", func() bool { return disposed() == n })
	waitUntil(t, "the observer handle to be released", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return obs.open == 0 && obs.handle == 0
	})
	if got := len(rec.all()); got != 3*n {
		t.Fatalf("%d notices, want %d (created, event, disposed per session)", got, 3*n)
	}
}
