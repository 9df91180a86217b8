package dshsession

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// An interrupted turn is closed by crash repair when the session is opened
// again, durably: a second open repairs nothing.
func TestReopenWithRepair(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, reopen func() *Store) {
		s := mustCreate(t, st, CreateOptions{ID: "crash"})
		turn(t, s, 1)
		mustAppend(t, s, "turn/start", map[string]int{"turn": 2}, nil)
		mustAppend(t, s, "user/message", userMsg("u2", "interrupted"), Append())
		mustAppend(t, s, "step/start", map[string]int{"turn": 2, "step": 1}, nil)
		if in, _ := s.Info(); string(in.OpenTurn) != "2" {
			t.Fatalf("openTurn = %s", in.OpenTurn)
		}
		if err := s.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if reopen != nil { // a durable store: reopen it from its file
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			st = reopen()
		}
		s2, err := st.Open("crash")
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		rep := s2.Repaired()
		if len(rep) != 2 || rep[0].Type != "step/end" || rep[1].Type != "turn/end" || rep[0].Seq != 9 {
			t.Fatalf("repaired = %+v", rep)
		}
		if !strings.Contains(string(rep[1].Data), `"interrupted"`) {
			t.Fatalf("turn/end data = %s", rep[1].Data)
		}
		in, err := s2.Info()
		if err != nil || in.OpenTurn != nil {
			t.Fatalf("after repair: %+v, %v", in, err)
		}
		n := in.Length
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
		s3, err := st.Open("crash")
		if err != nil {
			t.Fatal(err)
		}
		defer s3.Close()
		if len(s3.Repaired()) != 0 || length(t, s3) != n {
			t.Fatalf("second open repaired again: %+v", s3.Repaired())
		}
	})
}

func TestListInspectDelete(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		a := mustCreate(t, st, CreateOptions{ID: "a"})
		b := mustCreate(t, st, CreateOptions{ID: "b", Cwd: "/b"})
		turn(t, a, 1)
		mustAppend(t, b, "turn/start", map[string]int{"turn": 1}, nil)
		// List shows what is stored: a durable store materializes a session
		// with its first event, written behind until a flush.
		if a.Flush() != nil || b.Flush() != nil {
			t.Fatal("Flush")
		}
		list, err := st.List()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range list {
			ids = append(ids, e.Header.ID)
			if e.Revision == "" || e.Raw == nil || e.Header.CreatedAt == 0 {
				t.Fatalf("list entry %+v", e)
			}
		}
		sort.Strings(ids)
		if strings.Join(ids, ",") != "a,b" {
			t.Fatalf("List ids = %v", ids)
		}

		// Inspect works while b is open and shows the repair without writing it.
		in, err := st.Inspect("b")
		if err != nil {
			t.Fatal(err)
		}
		if in.Header.Cwd != "/b" || in.Torn || len(in.Repair) != 1 || len(in.Events) != 2 || in.Raw == nil {
			t.Fatalf("Inspect = %+v", in)
		}
		if got := length(t, b); got != 1 {
			t.Fatalf("Inspect wrote: length %d", got)
		}

		err = st.Delete("b")
		wantErr(t, err, ErrConflict, "store.delete-live")
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := st.Delete("b"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		_, err = st.Open("b")
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("Open after Delete: %v", err)
		}
		if !errors.Is(st.Delete("b"), ErrNotFound) {
			t.Fatal("second Delete")
		}
		if _, err := st.Inspect("b"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Inspect after Delete: %v", err)
		}
		if list, _ := st.List(); len(list) != 1 || list[0].Header.ID != "a" {
			t.Fatalf("List after Delete = %+v", list)
		}
	})
}

// Flush is the durability barrier: after it, another process could read the
// events. Here a write-behind SQLite store is inspected through a second
// read of the file after the store is closed.
func TestFlushDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flush.db")
	st, err := OpenStore(Config{Backend: SQLite, Path: path, BatchWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Create(CreateOptions{ID: "f"})
	if err != nil {
		t.Fatal(err)
	}
	turn(t, s, 1)
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("database after Flush: %v", err)
	}
	if err := s.Close(); err != nil || st.Close() != nil {
		t.Fatal("close")
	}
	st2 := mustOpenStore(t, Config{Backend: SQLite, Path: path, BatchWindow: WriteThrough})
	in, err := st2.Inspect("f")
	if err != nil || len(in.Events) != 6 || len(in.Repair) != 0 {
		t.Fatalf("Inspect = %+v, %v", in, err)
	}
	mem := mustOpenStore(t, Config{EventTypes: testTypes})
	ms := mustCreate(t, mem, CreateOptions{})
	if err := ms.Flush(); err != nil {
		t.Fatalf("memory Flush: %v", err)
	}
}

func TestStoreErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locked.db")
	mustOpenStore(t, Config{Backend: SQLite, Path: path})
	_, err := OpenStore(Config{Backend: SQLite, Path: path})
	wantErr(t, err, ErrConflict, "store.locked")

	_, err = OpenStore(Config{Backend: "tape"})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unknown backend: %v", err)
	}
	_, err = OpenStore(Config{Backend: SQLite})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("sqlite without path: %v", err)
	}
	jl := mustOpenStore(t, Config{Backend: JSONL, Path: filepath.Join(t.TempDir(), "logs"), Compression: "none"})
	s := mustCreate(t, jl, CreateOptions{ID: "j"})
	turn(t, s, 1)

	st := mustOpenStore(t, Config{EventTypes: testTypes})
	_, err = st.Open("missing")
	wantErr(t, err, ErrNotFound, "load.not-found")
	s1 := mustCreate(t, st, CreateOptions{ID: "open"})
	_ = s1
	_, err = st.Open("open")
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("Open of an open session: %v", err)
	}
	_, err = st.Create(CreateOptions{ID: "x", Legacy: true, Origin: "nonsense"})
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("bad origin: %v", err)
	}
}

func TestNulAndUTF8Refused(t *testing.T) {
	st := mustOpenStore(t, Config{EventTypes: testTypes})
	s := mustCreate(t, st, CreateOptions{})
	_, err := s.Append("turn/\x00start", nil, nil)
	wantErr(t, err, ErrInvalidArgument, "arg.nul")
	_, err = s.Append("note", json.RawMessage("\"a\x00b\""), nil)
	wantErr(t, err, ErrInvalidArgument, "arg.nul")
	_, err = s.Append("bad\xff", nil, nil)
	wantErr(t, err, ErrInvalidArgument, "arg.utf8")
	_, err = st.Open("a\x00b")
	wantErr(t, err, ErrInvalidArgument, "arg.nul")
	_, err = s.AppendBatch([]BatchItem{{Type: "ok"}, {Type: "bad\xff"}})
	if e := wantErr(t, err, ErrInvalidArgument, "arg.utf8"); e.Index != 1 {
		t.Fatalf("index %d", e.Index)
	}
	_, err = s.Append("note", make(chan int), nil)
	wantErr(t, err, ErrInvalidArgument, "arg.encode")
	if length(t, s) != 0 {
		t.Fatal("a refused call appended")
	}
}

func TestCloseIdempotent(t *testing.T) {
	st, err := OpenStore(Config{EventTypes: testTypes})
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Create(CreateOptions{ID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	// Closing the store first is safe: the session keeps it alive.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Store.Close = %v, want nil", err)
	}
	_, err = st.List()
	wantErr(t, err, ErrClosed, "handle.closed")
	mustAppend(t, s, "turn/start", map[string]int{"turn": 1}, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Session.Close again = %v, want nil", err)
	}
	_, err = s.Append("turn/end", nil, nil)
	wantErr(t, err, ErrClosed, "handle.closed")
	_, err = s.Fork(LastEvent, "")
	wantErr(t, err, ErrClosed, "handle.closed")
	var nilSession *Session
	if nilSession.Close() != nil || !errors.Is(nilSession.Flush(), ErrClosed) {
		t.Fatal("nil *Session")
	}
	var nilStore *Store
	if nilStore.Close() != nil || !errors.Is(nilStore.Delete("x"), ErrClosed) {
		t.Fatal("nil *Store")
	}
}

// OpenWindowed keeps a tail of the log resident; every call answers as on
// a full open, also for events long evicted.
func TestOpenWindowed(t *testing.T) {
	for _, b := range []Backend{JSONL, SQLite} {
		b := b
		t.Run(string(b), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			if b == SQLite {
				path += ".db"
			}
			cfg := Config{Backend: b, Path: path}
			st := mustOpenStore(t, cfg)
			s := mustCreate(t, st, CreateOptions{ID: "big"})
			for n := 1; n <= 1500; n++ { // 9000 events: two chunks evicted
				turn(t, s, n)
			}
			ids := messageIDs(t, s)
			early, err := s.Events(10, 20)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			w, err := st.OpenWindowed("big", 100)
			if err != nil {
				t.Fatalf("OpenWindowed: %v", err)
			}
			defer w.Close()
			if got := messageIDs(t, w); !reflect.DeepEqual(got, ids) {
				t.Fatalf("derive after a windowed open: %d ids, want %d", len(got), len(ids))
			}
			again, err := w.Events(10, 20)
			if err != nil || !reflect.DeepEqual(again, early) {
				t.Fatalf("old events read back: %v, %+v", err, again)
			}
			if n := length(t, w); n != 9001 {
				t.Fatalf("length %d, want 9001 (with the end-seed marker)", n)
			}
			turn(t, w, 1501)
			if _, err := st.OpenWindowed("big", 0); !errors.Is(err, ErrConflict) {
				t.Fatalf("a second open: %v", err)
			}
			if _, err := st.OpenWindowed("missing", 0); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a missing session: %v", err)
			}
		})
	}
}

func TestReaderBesideWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "readers.db")
	w := mustOpenStore(t, Config{Backend: SQLite, Path: path})
	s := mustCreate(t, w, CreateOptions{ID: "r"})
	turn(t, s, 1)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	r := mustOpenStore(t, Config{Backend: SQLite, Path: path, ReadOnly: true})
	rs, err := r.Open("r")
	if err != nil {
		t.Fatalf("reader Open: %v", err)
	}
	events, err := rs.Events(0, ^uint64(0))
	if err != nil || len(events) != 6 || len(rs.Repaired()) != 0 {
		t.Fatalf("reader Events = %d events, %v; repaired %v", len(events), err, rs.Repaired())
	}
	var e *Error
	if _, err := rs.Append("turn/start", map[string]int{"turn": 2}, nil); !errors.Is(err, ErrConflict) || !errors.As(err, &e) || e.Rule != "store.read-only" {
		t.Fatalf("reader Append: %v", err)
	}
	if _, err := r.Create(CreateOptions{ID: "x"}); !errors.As(err, &e) || e.Rule != "store.read-only" {
		t.Fatalf("reader Create: %v", err)
	}
	if err := rs.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(Config{Backend: SQLite, Path: path, Locking: "none"}); err == nil {
		t.Fatal("a bad Locking was accepted")
	}
}

// A torn tail is cut by Repair after a copy of its bytes is kept beside
// the log, and the cut is reported; a dry run only says what it would cut.
func TestRepairKeepsACopyOfWhatItCuts(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	cfg := Config{EventTypes: testTypes, Backend: JSONL, Path: root, Compression: "none"}
	st := mustOpenStore(t, cfg)
	s := mustCreate(t, st, CreateOptions{ID: "r"})
	turn(t, s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(root, "_no-cwd", "r", "session.jsonl")
	clean, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	torn := []byte(`{"type":"turn/sta`)
	if err := os.WriteFile(log, append(append([]byte{}, clean...), torn...), 0o600); err != nil {
		t.Fatal(err)
	}
	dry, err := st.Repair("r", RepairOptions{DryRun: true})
	if err != nil || dry.Applied || dry.TornTail == nil || dry.TornTail.At != uint64(len(clean)) || dry.Cut != nil {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	rep, err := st.Repair("r", RepairOptions{})
	if err != nil || !rep.Applied || rep.Cut == nil || rep.Cut.Why != "partial-line" || rep.Cut.Length != uint64(len(torn)) {
		t.Fatalf("Repair = %+v, %v", rep, err)
	}
	kept, err := os.ReadFile(rep.Cut.Copy)
	if err != nil || string(kept) != string(torn) || filepath.Dir(rep.Cut.Copy) != filepath.Dir(log) {
		t.Fatalf("copy %q = %q, %v", rep.Cut.Copy, kept, err)
	}
	in, err := st.Inspect("r")
	if err != nil || in.TornTail != nil || len(in.Quarantined) != 1 || in.Quarantined[0] != rep.Cut.Copy {
		t.Fatalf("Inspect = %+v, %v", in, err)
	}
	s2, err := st.Open("r")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_, err = st.Repair("r", RepairOptions{})
	wantErr(t, err, ErrConflict, "load.live-prepare")
}
