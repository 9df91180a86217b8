package dshsession

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
)

// A Strict store refuses an undeclared type, accepts a declared one and an
// ignorable one, and every later open reads them back.
func TestHostTypesAndAdmission(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.db")
	cfg := Config{Backend: SQLite, Path: path, EventTypes: []string{"myapp/note"}}
	st := mustOpenStore(t, cfg)
	s := mustCreate(t, st, CreateOptions{ID: "h"})
	info, err := s.Info()
	if err != nil || info.Admission != Strict || len(info.EventTypes) != 1 || info.EventTypes[0] != "myapp/note" {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	_, err = s.Append("myapp/other", map[string]int{"x": 1}, nil)
	if e := (*Error)(nil); !errors.Is(err, ErrRejected) || !errors.As(err, &e) || e.Rule != "admit.unknown-type" {
		t.Fatalf("undeclared type: %v", err)
	}
	_, err = s.Append("user/message", json.RawMessage(`{"id":"u","role":"user","content":"hi","source":{"kind":"user"}}`), Append())
	if e := (*Error)(nil); !errors.As(err, &e) || e.Rule != "msg.content" {
		t.Fatalf("malformed message: %v", err)
	}
	mustAppend(t, s, "myapp/note", map[string]int{"x": 1}, nil)
	ev := mustAppend(t, s, "other/app-data", map[string]int{"y": 2}, IgnorableEvent())
	if !ev.Ignorable {
		t.Fatalf("ignorable event = %s", ev.Raw)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened by a store that declares nothing: the declared type is
	// unknown to it, the ignorable one is kept.
	bare := mustOpenStore(t, Config{Backend: SQLite, Path: path})
	if _, err := bare.Open("h"); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("open without the declaration: %v", err)
	}
	in, err := bare.Inspect("h")
	if err != nil || len(in.Problems) != 1 || in.Problems[0].Seq != 0 || in.Problems[0].Rule != "load.unknown-type" {
		t.Fatalf("Inspect = %+v, %v", in.Problems, err)
	}
	if err := bare.Close(); err != nil {
		t.Fatal(err)
	}
	again := mustOpenStore(t, cfg)
	r, err := again.Open("h")
	if err != nil {
		t.Fatal(err)
	}
	if n := length(t, r); n != 3 { // the two events and the end-seed marker
		t.Fatalf("reopened length %d", n)
	}
	// A Reference store takes what the reference takes.
	ref := mustOpenStore(t, Config{Admission: Reference})
	rs := mustCreate(t, ref, CreateOptions{ID: "r"})
	if _, err := rs.Append("myapp/other", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(Config{EventTypes: []string{"user/message"}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("declaring a core type: %v", err)
	}
}
