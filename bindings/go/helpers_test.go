package dshsession

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

// backend opens a fresh store of one kind for a test.
type backend struct {
	name string
	open func(t *testing.T) (*Store, func() *Store) // the store, and a reopen after closing it
}

// testTypes are the host event types the tests append, declared as a host
// declares its own (a Strict store refuses undeclared types).
var testTypes = []string{"test/note", "test/echo", "test/boom"}

var backends = []backend{
	{"memory", func(t *testing.T) (*Store, func() *Store) {
		st := mustOpenStore(t, Config{EventTypes: testTypes})
		return st, nil // a memory store cannot be reopened
	}},
	{"sqlite", func(t *testing.T) (*Store, func() *Store) {
		cfg := Config{EventTypes: testTypes, Backend: SQLite, Path: filepath.Join(t.TempDir(), "sessions.db")}
		return mustOpenStore(t, cfg), func() *Store { return mustOpenStore(t, cfg) }
	}},
}

// eachBackend runs f as a subtest over every backend.
func eachBackend(t *testing.T, f func(t *testing.T, st *Store, reopen func() *Store)) {
	for _, b := range backends {
		b := b
		t.Run(b.name, func(t *testing.T) {
			st, reopen := b.open(t)
			f(t, st, reopen)
		})
	}
}

func mustOpenStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	st, err := OpenStore(cfg)
	if err != nil {
		t.Fatalf("OpenStore(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Store.Close: %v", err)
		}
	})
	return st
}

func mustCreate(t *testing.T, st *Store, opts CreateOptions) *Session {
	t.Helper()
	s, err := st.Create(opts)
	if err != nil {
		t.Fatalf("Create(%+v): %v", opts, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustAppend(t *testing.T, s *Session, typ string, data any, intent SurfaceIntent) Event {
	t.Helper()
	ev, err := s.Append(typ, data, intent)
	if err != nil {
		t.Fatalf("Append(%s): %v", typ, err)
	}
	return ev
}

// userMsg is the data of a user/message event.
func userMsg(id, text string) json.RawMessage {
	return raw(`{"id":%q,"role":"user","content":[{"type":"text","text":%q}],"source":{"kind":"user"}}`, id, text)
}

// assistantMsg is the data of an assistant/message event.
func assistantMsg(turn, step int, id, text string) json.RawMessage {
	return raw(`{"turn":%d,"step":%d,"message":{"role":"assistant","content":[{"type":"text","text":%q}],`+
		`"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":%q}}`, turn, step, text, id)
}

func raw(format string, args ...any) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(format, args...))
}

// turn appends a complete turn (turn/start, user message, step, assistant
// message, step/end, turn/end) and returns the seqs of the two messages.
func turn(t *testing.T, s *Session, n int) (user, assistant uint64) {
	t.Helper()
	mustAppend(t, s, "turn/start", map[string]int{"turn": n}, nil)
	user = mustAppend(t, s, "user/message", userMsg(fmt.Sprintf("u%d", n), "question"), Append()).Seq
	mustAppend(t, s, "step/start", map[string]int{"turn": n, "step": 1}, nil)
	assistant = mustAppend(t, s, "assistant/message", assistantMsg(n, 1, fmt.Sprintf("a%d", n), "answer"),
		Intent{Op: Append(), Sources: []uint64{}}).Seq
	mustAppend(t, s, "step/end", map[string]int{"turn": n, "step": 1}, nil)
	mustAppend(t, s, "turn/end", raw(`{"turn":%d,"reason":{"kind":"completed"}}`, n), nil)
	return user, assistant
}

func messageIDs(t *testing.T, s *Session) []string {
	t.Helper()
	msgs, err := s.Derive()
	if err != nil {
		t.Fatalf("Derive: %v", err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

func length(t *testing.T, s *Session) uint64 {
	t.Helper()
	in, err := s.Info()
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	return in.Length
}

// wantErr checks that err is an *Error with the status (through errors.Is
// on the sentinel) and rule, and returns it.
func wantErr(t *testing.T, err error, sentinel *Error, rule string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want an *Error %s %s, got %v", sentinel.Status, rule, err)
	}
	if !errors.Is(err, sentinel) || e.Rule != rule {
		t.Fatalf("want %s %s, got %v", sentinel.Status, rule, err)
	}
	return e
}
