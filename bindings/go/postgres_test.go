package dshsession

import (
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"
)

// A PostgreSQL store in a fresh schema of the server DSH_TEST_POSTGRES_URL
// names: a session written behind a long window reaches the database at
// Flush (a reader beside the writer sees it), and a new store on the schema
// reads the same events back. Skipped without a server.
func TestPostgresRoundTrip(t *testing.T) {
	url := os.Getenv("DSH_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("no PostgreSQL server: set DSH_TEST_POSTGRES_URL (postgresql://user@host:port/db) to run this test")
	}
	schema := fmt.Sprintf("go_%d_%d", os.Getpid(), time.Now().UnixNano())
	cfg := Config{Backend: Postgres, URL: url, Schema: schema, EventTypes: testTypes, BatchWindow: time.Hour}

	w := mustOpenStore(t, cfg)
	s := mustCreate(t, w, CreateOptions{ID: "pg", Cwd: "/home/demo"})
	turn(t, s, 1)
	mustAppend(t, s, "test/note", raw(`{"z":1,"a":[1.50,"ünï"]}`), nil)
	want, err := s.Events(0, End)
	if err != nil || len(want) != 7 {
		t.Fatalf("Events = %d events, %v", len(want), err)
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}

	// Flushed: a reader beside the writer reads every event, byte for byte.
	readCfg := cfg
	readCfg.ReadOnly = true
	r := mustOpenStore(t, readCfg)
	rs, err := r.Open("pg")
	if err != nil {
		t.Fatalf("reader Open: %v", err)
	}
	if got, err := rs.Events(0, End); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("reader Events = %+v, %v; want %+v", got, err, want)
	}
	if err := rs.Close(); err != nil || r.Close() != nil {
		t.Fatal("closing the reader")
	}

	if err := s.Close(); err != nil {
		t.Fatalf("Session.Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Store.Close: %v", err)
	}

	// A new store on the same schema: the log comes back as written, then
	// the session/end-seed marker the open appends.
	st := mustOpenStore(t, cfg)
	if list, err := st.List(); err != nil || len(list) != 1 || list[0].Header.ID != "pg" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	s2, err := st.Open("pg")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if s2.Header().Cwd != "/home/demo" || len(s2.Repaired()) != 0 {
		t.Fatalf("reopened: header %+v, repaired %+v", s2.Header(), s2.Repaired())
	}
	got, err := s2.Events(0, End)
	if err != nil || len(got) != len(want)+1 || !reflect.DeepEqual(got[:len(want)], want) ||
		got[len(want)].Type != "session/end-seed" {
		t.Fatalf("reopened Events = %+v, %v; want %+v and session/end-seed", got, err, want)
	}
	if ids := messageIDs(t, s2); !reflect.DeepEqual(ids, []string{"u1", "a1"}) {
		t.Fatalf("Derive ids = %v", ids)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete("pg"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}
