package dshsession

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestAppendDerive(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		s := mustCreate(t, st, CreateOptions{ID: "s1", Cwd: "/home/demo"})
		if s.ID() != "s1" || s.Header().Cwd != "/home/demo" || s.Header().Raw == nil {
			t.Fatalf("header = %+v", s.Header())
		}
		ev := mustAppend(t, s, "turn/start", map[string]int{"turn": 1}, nil)
		if ev.Seq != 0 || ev.Type != "turn/start" || string(ev.Data) != `{"turn":1}` || ev.SurfaceOp != nil {
			t.Fatalf("turn/start = %+v", ev)
		}
		ev = mustAppend(t, s, "user/message", userMsg("u1", "hi <there> & \u00e9"), Append())
		if ev.Seq != 1 || ev.Op() != Append() || ev.SourceEventSeqs != nil {
			t.Fatalf("user/message = %+v", ev)
		}
		ev = mustAppend(t, s, "assistant/message", assistantMsg(1, 1, "a1", "hello"), Append().From(0, 1))
		if !reflect.DeepEqual(ev.SourceEventSeqs, []uint64{0, 1}) {
			t.Fatalf("sources = %v", ev.SourceEventSeqs)
		}
		evs, err := s.Events(0, End)
		if err != nil || len(evs) != 3 {
			t.Fatalf("Events = %v, %v", evs, err)
		}
		if string(evs[2].Raw) != string(ev.Raw) {
			t.Fatalf("Events and Append disagree:\n%s\n%s", evs[2].Raw, ev.Raw)
		}
		msgs, err := s.Derive()
		if err != nil || len(msgs) != 2 {
			t.Fatalf("Derive = %v, %v", msgs, err)
		}
		if msgs[0].ID != "u1" || msgs[0].Role != "user" || msgs[1].ID != "a1" || msgs[1].Role != "assistant" {
			t.Fatalf("messages = %+v", msgs)
		}
		if string(msgs[0].Raw) != string(userMsg("u1", "hi <there> & \u00e9")) {
			t.Fatalf("user message not verbatim: %s", msgs[0].Raw)
		}
		all, err := s.DeriveJSON()
		if err != nil {
			t.Fatal(err)
		}
		var again bytes.Buffer
		enc := json.NewEncoder(&again)
		enc.SetEscapeHTML(false) // json.Marshal would turn < into \u003c
		if err := enc.Encode(msgs); err != nil || strings.TrimSpace(again.String()) != string(all) {
			t.Fatalf("[]Message does not marshal back to DeriveJSON:\n%s\n%s", again.String(), all)
		}
	})
}

func TestRejectWithRule(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		s := mustCreate(t, st, CreateOptions{})
		u, a := turn(t, s, 1)
		n := length(t, s)

		// A replace over both messages that cites only the first one.
		_, err := s.Append("user/message", userMsg("sum", "summary"), Replace(u, a).From(u))
		e := wantErr(t, err, ErrRejected, "surface.replace-uncovered")
		if e.Op != "Session.Append" || e.Message == "" || e.Index != -1 || e.Raw == nil {
			t.Fatalf("error = %#v", e)
		}
		if !errors.Is(err, &Error{Rule: "surface.replace-uncovered"}) || errors.Is(err, ErrConflict) {
			t.Fatal("errors.Is on the rule / another status")
		}
		_, err = s.Append("user/message", userMsg("x", "no op"), nil)
		wantErr(t, err, ErrRejected, "surface.op-missing")
		_, err = s.Append("turn/start", map[string]int{"turn": 2}, Intent{Sources: []uint64{0}})
		wantErr(t, err, ErrRejected, "surface.sources-on-non-surface")
		_, err = s.Append("user/message", json.RawMessage(`{"id":`), Append())
		if !errors.Is(err, ErrInvalidJSON) {
			t.Fatalf("bad JSON: %v", err)
		}
		if got := length(t, s); got != n {
			t.Fatalf("a refused append changed the log: %d -> %d", n, got)
		}
	})
}

func TestAppendBatchAllOrNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		s := mustCreate(t, st, CreateOptions{})
		mustAppend(t, s, "turn/start", map[string]int{"turn": 1}, nil)
		_, err := s.AppendBatch([]BatchItem{
			{Type: "user/message", Data: userMsg("u1", "q"), Intent: Append()},
			{Type: "step/start", Data: map[string]int{"turn": 1, "step": 1}},
			{Type: "user/message", Data: userMsg("u2", "q"), Intent: Replace(1, 1)}, // does not cite 1
		})
		if e := wantErr(t, err, ErrRejected, "surface.replace-uncovered"); e.Index != 2 {
			t.Fatalf("index = %d, want 2", e.Index)
		}
		if got := length(t, s); got != 1 {
			t.Fatalf("a failed batch committed events: length %d", got)
		}
		_, err = s.AppendBatch([]BatchItem{{Type: "x", Data: nil}, {Type: "y", Data: json.RawMessage(`{`)}})
		if e := wantErr(t, err, ErrInvalidJSON, "json.parse"); e.Index != 1 {
			t.Fatalf("index = %d, want 1", e.Index)
		}

		evs, err := s.AppendBatch([]BatchItem{
			{Type: "user/message", Data: userMsg("u1", "q"), Intent: Append()},
			{Type: "step/start", Data: map[string]int{"turn": 1, "step": 1}},
			{Type: "user/message", Data: userMsg("u2", "q"), Intent: Replace(1, 1).From(1)},
		})
		if err != nil || len(evs) != 3 || evs[0].Seq != 1 || evs[2].Seq != 3 || evs[2].Op() != Replace(1, 1) {
			t.Fatalf("AppendBatch = %+v, %v", evs, err)
		}
		if ids := messageIDs(t, s); !reflect.DeepEqual(ids, []string{"u2"}) {
			t.Fatalf("derived %v", ids)
		}
	})
}

func TestValidate(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		s := mustCreate(t, st, CreateOptions{})
		u, a := turn(t, s, 1)
		ev, err := s.Validate("user/message", userMsg("sum", "summary"), Replace(u, a).From(u, a))
		if err != nil || ev.Seq != 6 || ev.Type != "user/message" {
			t.Fatalf("Validate = %+v, %v", ev, err)
		}
		_, err = s.Validate("user/message", userMsg("sum", "summary"), Replace(u, a).From(a))
		wantErr(t, err, ErrRejected, "surface.replace-uncovered")
		if got := length(t, s); got != 6 {
			t.Fatalf("Validate committed: length %d", got)
		}
	})
}

func TestDeriveAfterCompaction(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		s := mustCreate(t, st, CreateOptions{})
		u1, a1 := turn(t, s, 1)
		_, a2 := turn(t, s, 2)
		if ids := messageIDs(t, s); !reflect.DeepEqual(ids, []string{"u1", "a1", "u2", "a2"}) {
			t.Fatalf("before: %v", ids)
		}
		mustAppend(t, s, "compaction/start", raw(`{"turn":null}`), nil)
		sum := mustAppend(t, s, "user/message",
			raw(`{"id":"sum","role":"user","content":[{"type":"text","text":"summary"}],"source":{"kind":"compaction"}}`),
			Replace(u1, a1).From(u1, a1))
		mustAppend(t, s, "compaction/end", raw(`{"turn":null}`), nil)
		if ids := messageIDs(t, s); !reflect.DeepEqual(ids, []string{"sum", "u2", "a2"}) {
			t.Fatalf("after: %v", ids)
		}
		sf, err := s.Surface()
		if err != nil || sf.ReplaceGeneration != 1 || len(sf.Nodes) != 3 || sf.Nodes[0] != sum.Seq || sf.Nodes[2] != a2 {
			t.Fatalf("Surface = %+v, %v", sf, err)
		}
		in, err := s.Info()
		if err != nil || in.Length != 15 || in.ReplaceGeneration != 1 || in.OpenTurn != nil || in.ID != s.ID() {
			t.Fatalf("Info = %+v, %v", in, err)
		}
		// The pure derivation of the same log agrees.
		evs, _ := s.Events(0, End)
		msgs, err := DeriveMessages(evs)
		if err != nil || len(msgs) != 3 || msgs[0].ID != "sum" {
			t.Fatalf("DeriveMessages = %+v, %v", msgs, err)
		}
	})
}

func TestFork(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		s := mustCreate(t, st, CreateOptions{ID: "src", Cwd: "/w"})
		turn(t, s, 1)
		child, err := s.Fork(LastEvent, "child")
		if err != nil {
			t.Fatal(err)
		}
		defer child.Close()
		h := child.Header()
		if h.ID != "child" || h.ParentSession != "src" || h.SeedLength != 6 || h.Cwd != "/w" {
			t.Fatalf("child header = %+v", h)
		}
		evs, _ := child.Events(0, End)
		if len(evs) != 7 || evs[6].Type != "session/end-seed" {
			t.Fatalf("child events = %d, last %+v", len(evs), evs[len(evs)-1])
		}
		mustAppend(t, child, "turn/start", map[string]int{"turn": 2}, nil)
		mustAppend(t, child, "user/message", userMsg("c2", "fork"), Append())
		if ids := messageIDs(t, child); !reflect.DeepEqual(ids, []string{"u1", "a1", "c2"}) {
			t.Fatalf("child derived %v", ids)
		}
		if ids := messageIDs(t, s); !reflect.DeepEqual(ids, []string{"u1", "a1"}) {
			t.Fatalf("source changed: %v", ids)
		}
		gen, err := s.Fork(2, "")
		if err != nil {
			// seq 2 is step/start inside turn 1
			wantErr(t, err, ErrRejected, "fork.open-turn")
		} else {
			gen.Close()
			t.Fatal("fork inside an open turn succeeded")
		}
		_, err = s.Fork(99, "")
		wantErr(t, err, ErrInvalidArgument, "fork.out-of-range")
		_, err = s.Fork(LastEvent, "child")
		e := wantErr(t, err, ErrConflict, "fork.child-exists")
		if e.ReferenceCode != "SESSION_ALREADY_EXISTS" {
			t.Fatalf("referenceCode = %q", e.ReferenceCode)
		}
		g, err := s.Fork(5, "")
		if err != nil || g.ID() == "" || g.Header().SeedLength != 6 {
			t.Fatalf("generated-id fork = %+v, %v", g, err)
		}
		g.Close()
	})
}

func TestEventsRange(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		s := mustCreate(t, st, CreateOptions{})
		turn(t, s, 1)
		for _, c := range []struct{ from, to, want uint64 }{{0, End, 6}, {1, 3, 2}, {4, 100, 2}, {6, End, 0}, {3, 3, 0}} {
			evs, err := s.Events(c.from, c.to)
			if err != nil || uint64(len(evs)) != c.want {
				t.Fatalf("Events(%d, %d) = %d events, %v; want %d", c.from, c.to, len(evs), err, c.want)
			}
			if len(evs) > 0 && evs[0].Seq != c.from {
				t.Fatalf("Events(%d, %d) starts at %d", c.from, c.to, evs[0].Seq)
			}
		}
	})
}

func TestRequestHeaderAndContext(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		s := mustCreate(t, st, CreateOptions{})
		if h, err := s.RequestHeader(); err != nil || h != nil {
			t.Fatalf("RequestHeader = %s, %v", h, err)
		}
		if c, err := s.RequestContext(); err != nil || c != nil {
			t.Fatalf("RequestContext = %s, %v", c, err)
		}
		mustAppend(t, s, "turn/start", map[string]int{"turn": 1}, nil)
		mustAppend(t, s, "request/header", raw(`{"header":{"config":{"provider":"deepseek","model":"m"},"system":"S"},"reason":"initial"}`), nil)
		mustAppend(t, s, "request/context", raw(`{"provider":"deepseek","model":"m","contextWindow":1000}`), nil)
		h, err := s.RequestHeader()
		var hv struct {
			System string `json:"system"`
		}
		if err != nil || json.Unmarshal(h, &hv) != nil || hv.System != "S" {
			t.Fatalf("RequestHeader = %s, %v", h, err)
		}
		c, err := s.RequestContext()
		if err != nil || string(c) != `{"provider":"deepseek","model":"m","contextWindow":1000}` {
			t.Fatalf("RequestContext = %s, %v", c, err)
		}
	})
}

func TestSeed(t *testing.T) {
	eachBackend(t, func(t *testing.T, st *Store, _ func() *Store) {
		src := mustCreate(t, st, CreateOptions{})
		turn(t, src, 1)
		evs, _ := src.Events(0, End)
		s := mustCreate(t, st, CreateOptions{ID: "seeded", Seed: evs})
		if got := length(t, s); got != 7 {
			t.Fatalf("seeded length %d, want 6 + end-seed", got)
		}
		again, _ := s.Events(0, 6)
		for i := range evs {
			if !reflect.DeepEqual(evs[i].Data, again[i].Data) || evs[i].Time != again[i].Time {
				t.Fatalf("seed event %d changed: %s -> %s", i, evs[i].Raw, again[i].Raw)
			}
		}
		empty := mustCreate(t, st, CreateOptions{Seed: []Event{}})
		if got := length(t, empty); got != 1 {
			t.Fatalf("empty seed: length %d, want the end-seed marker only", got)
		}
		bad := append([]Event(nil), evs...)
		bad[3].Seq = 7
		_, err := st.Create(CreateOptions{Seed: bad})
		if e := wantErr(t, err, ErrRejected, "seq.seed-not-contiguous"); e.Index != 3 {
			t.Fatalf("index = %d, want 3", e.Index)
		}
		_, err = st.Create(CreateOptions{ID: "seeded"})
		wantErr(t, err, ErrConflict, "store.duplicate-id")
	})
}
