package dshsession

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// waitUntil runs GCs until cond holds (finalizers run on their own
// goroutine after a GC finds the object unreachable).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

// Sessions dropped without Close are closed by their finalizer: on a
// memory store a closed session can be opened again, which proves it.
func TestGCFinalizersCloseLeakedSessions(t *testing.T) {
	st := mustOpenStore(t, Config{EventTypes: testTypes})
	const n = 300
	for i := 0; i < n; i++ {
		s, err := st.Create(CreateOptions{ID: fmt.Sprintf("leak-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendBatch([]BatchItem{
			{Type: "turn/start", Data: map[string]int{"turn": 1}},
			{Type: "turn/end", Data: raw(`{"turn":1,"reason":{"kind":"completed"}}`)},
		}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			c, err := s.Fork(LastEvent, fmt.Sprintf("leak-%d-fork", i)) // dropped too
			if err != nil {
				t.Fatal(err)
			}
			_ = c.ID()
		}
		if i%50 == 0 {
			runtime.GC()
		}
	}
	for i := 0; i < n; i += 37 {
		id := fmt.Sprintf("leak-%d", i)
		var s *Session
		waitUntil(t, id+" to be finalized", func() bool {
			var err error
			s, err = st.Open(id)
			if err != nil && !errors.Is(err, ErrConflict) {
				t.Fatalf("Open(%s): %v", id, err)
			}
			return err == nil
		})
		// 2 events + the session/end-seed marker the first Open appended.
		if err := s.Close(); err != nil || length(t, mustReopen(t, st, id)) != 3 {
			t.Fatalf("reopened %s: %v", id, err)
		}
	}
}

func mustReopen(t *testing.T, st *Store, id string) *Session {
	t.Helper()
	s, err := st.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Stores and sessions dropped in any order, and a store closed while its
// leaked sessions still wait for their finalizers: nothing crashes, and an
// explicitly closed handle is never closed again by a finalizer.
func TestGCLeakedStoresAndClosedHandles(t *testing.T) {
	dir := t.TempDir()
	for round := 0; round < 4; round++ {
		st, err := OpenStore(Config{EventTypes: testTypes, Backend: SQLite, Path: filepath.Join(dir, fmt.Sprintf("r%d.db", round))})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 40; i++ {
			s, err := st.Create(CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			turn(t, s, 1)
			if i%2 == 0 {
				if err := s.Close(); err != nil { // finalizer cleared: no double close
					t.Fatal(err)
				}
			}
		}
		if round%2 == 0 {
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		} // odd rounds leak the store too
		runtime.GC()
	}
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	// The finalizer of a leaked store released its lock on the file.
	waitUntil(t, "a leaked store to release its database", func() bool {
		st, err := OpenStore(Config{EventTypes: testTypes, Backend: SQLite, Path: filepath.Join(dir, "r1.db")})
		if err == nil {
			_ = st.Close()
		}
		return err == nil
	})
}

// Many goroutines append to one session and read it at once; every append
// gets its own seq and each goroutine's events stay in its order.
func TestConcurrentAppends(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		s := mustCreate(t, st, CreateOptions{})
		const workers, each = 8, 40
		var wg sync.WaitGroup
		errs := make(chan error, workers*2)
		for w := 0; w < workers; w++ {
			wg.Add(2)
			go func(w int) {
				defer wg.Done()
				for k := 0; k < each; k++ {
					if _, err := s.Append("test/note", map[string]int{"w": w, "k": k}, nil); err != nil {
						errs <- err
						return
					}
				}
			}(w)
			go func() { // readers alongside
				defer wg.Done()
				for k := 0; k < each/4; k++ {
					if _, err := s.Derive(); err != nil {
						errs <- err
						return
					}
					if _, err := s.Events(0, End); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		evs, err := s.Events(0, End)
		if err != nil || len(evs) != workers*each {
			t.Fatalf("%d events, %v", len(evs), err)
		}
		next := make([]int, workers)
		for i, ev := range evs {
			var d struct{ W, K int }
			if ev.Seq != uint64(i) || decode("test", ev.Data, &d) != nil || d.K != next[d.W] {
				t.Fatalf("event %d out of order: %s", i, ev.Raw)
			}
			next[d.W]++
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	})
}

// Close racing with calls on other goroutines: each call either completes
// or reports ErrClosed; the handle is freed once, after the calls in flight.
func TestConcurrentClose(t *testing.T) {
	st := mustOpenStore(t, Config{EventTypes: testTypes})
	for round := 0; round < 20; round++ {
		s, err := st.Create(CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 50; k++ {
					_, err := s.Append("test/note", nil, nil)
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Add(2)
		for c := 0; c < 2; c++ {
			go func() {
				defer wg.Done()
				time.Sleep(time.Millisecond)
				if err := s.Close(); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
}
