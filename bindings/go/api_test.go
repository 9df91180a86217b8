package dshsession

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestABIVersionCheck(t *testing.T) {
	if ABIVersion() != HeaderABIVersion || HeaderABIVersion != 1 {
		t.Fatalf("library ABI %d, header ABI %d", ABIVersion(), HeaderABIVersion)
	}
	if err := checkABI(ABIVersion(), HeaderABIVersion); err != nil {
		t.Fatal(err)
	}
	err := checkABI(2, 1)
	if err == nil || !strings.Contains(err.Error(), "ABI version 2") || !strings.Contains(err.Error(), "DSH_ABI_VERSION 1") {
		t.Fatalf("checkABI(2, 1) = %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "ABI version 3") {
				t.Errorf("requireABI(3, 1) recovered %v, want a panic", r)
			}
		}()
		requireABI(3, 1)
	}()
	requireABI(1, 1)
	var info struct {
		Version  string   `json:"version"`
		ABI      uint32   `json:"abi"`
		Features []string `json:"features"`
	}
	b, err := BuildInfo()
	if err != nil || json.Unmarshal(b, &info) != nil || info.Version != Version() || info.ABI != ABIVersion() {
		t.Fatalf("BuildInfo = %s, %v (Version %q)", b, err, Version())
	}
}

func TestStatusNamesMatchLibrary(t *testing.T) {
	for st := Status(-1); st <= 100; st++ {
		if got, want := st.String(), libStatusName(st); got != want {
			t.Errorf("Status(%d).String() = %q, dsh_status_name = %q", st, got, want)
		}
	}
}

func TestErrorIsAndAs(t *testing.T) {
	e := &Error{Op: "Session.Append", Status: StatusRejected, Rule: "surface.op-missing", Message: "m", Index: 3}
	var err error = fmt.Errorf("wrapped: %w", e)
	sentinels := []*Error{ErrInvalidJSON, ErrRejected, ErrCorrupt, ErrSchemaMismatch, ErrIO, ErrNotFound,
		ErrConflict, ErrInvalidArgument, ErrClosed, ErrInternal}
	for _, s := range sentinels {
		if errors.Is(err, s) != (s.Status == StatusRejected) {
			t.Errorf("errors.Is(rejected, %s) wrong", s.Status)
		}
	}
	if !errors.Is(err, &Error{Rule: "surface.op-missing"}) || errors.Is(err, &Error{Rule: "surface.other"}) ||
		!errors.Is(err, &Error{Status: StatusRejected, Rule: "surface.op-missing"}) ||
		errors.Is(err, &Error{Status: StatusConflict, Rule: "surface.op-missing"}) || errors.Is(err, &Error{}) {
		t.Error("rule matching")
	}
	var got *Error
	if !errors.As(err, &got) || got != e {
		t.Fatal("errors.As")
	}
	want := "dshsession: Session.Append: DSH_E_REJECTED surface.op-missing: m (index 3)"
	if e.Error() != want || ErrNotFound.Error() != "dshsession: DSH_E_NOT_FOUND" {
		t.Fatalf("Error() = %q / %q", e.Error(), ErrNotFound.Error())
	}
	parsed := newError("op", StatusRejected, []byte(`{"status":"DSH_E_REJECTED","code":2,"rule":"r","message":"m","index":0}`))
	if parsed.Index != 0 || parsed.Rule != "r" {
		t.Fatalf("newError = %+v", parsed)
	}
	if bad := newError("op", StatusIO, []byte("not json")); bad.Status != StatusIO || bad.Message == "" {
		t.Fatalf("newError(garbage) = %+v", bad)
	}
}

func TestIntentEncoding(t *testing.T) {
	for _, c := range []struct {
		in   SurfaceIntent
		want string
	}{
		{nil, ""},
		{Intent{}, ""},
		{SurfaceOp{}, ""},
		{Append(), `{"surfaceOp":"append"}`},
		{Append().From(), `{"surfaceOp":"append"}`},
		{Intent{Op: Append(), Sources: []uint64{}}, `{"surfaceOp":"append","sourceEventSeqs":[]}`},
		{Append().From(4, 5), `{"surfaceOp":"append","sourceEventSeqs":[4,5]}`},
		{Replace(1, 8).From(1, 6, 8), `{"surfaceOp":{"op":"replace","start":1,"end":8},"sourceEventSeqs":[1,6,8]}`},
		{Intent{Sources: []uint64{2}}, `{"sourceEventSeqs":[2]}`},
		{IgnorableEvent(), `{"ignorable":true}`},
		{Intent{Op: Append(), Ignorable: true}, `{"surfaceOp":"append","ignorable":true}`},
	} {
		if got := string(intentJSON(c.in)); got != c.want {
			t.Errorf("intentJSON(%#v) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, op := range []SurfaceOp{{}, Append(), Replace(3, 9)} {
		b, err := json.Marshal(op)
		var back SurfaceOp
		if err != nil || json.Unmarshal(b, &back) != nil || back != op {
			t.Errorf("SurfaceOp round trip %+v -> %s -> %+v", op, b, back)
		}
	}
	var op SurfaceOp
	if op.UnmarshalJSON([]byte(`{"op":"replace","start":1}`)) == nil || op.UnmarshalJSON([]byte(`"prepend"`)) == nil {
		t.Error("malformed surface ops accepted")
	}
	if (Event{SurfaceOp: json.RawMessage(`"weird"`)}).Op() != (SurfaceOp{}) {
		t.Error("Event.Op of a malformed op")
	}
}

func TestEventJSON(t *testing.T) {
	text := `{"type":"user/message","seq":3,"time":-5,"data":{"b":1,"a":[1.50,"\ud800"]},` +
		`"sourceEventSeqs":[],"surfaceOp":{"op":"replace","start":1,"end":2},"ignorable":true}`
	var e Event
	if err := json.Unmarshal([]byte(text), &e); err != nil {
		t.Fatal(err)
	}
	if string(e.Raw) != text || e.SourceEventSeqs == nil || len(e.SourceEventSeqs) != 0 || !e.Ignorable ||
		e.Time != -5 || e.Op() != Replace(1, 2) {
		t.Fatalf("decoded %+v", e)
	}
	b, err := e.MarshalJSON()
	if err != nil || string(b) != text {
		t.Fatalf("MarshalJSON = %s, %v", b, err)
	}
	b, _ = Event{Type: "x", Seq: 1}.MarshalJSON()
	if string(b) != `{"type":"x","seq":1,"time":0,"data":null}` {
		t.Fatalf("minimal event = %s", b)
	}
	var m Message
	if err := json.Unmarshal([]byte(`5`), &m); err != nil || string(m.Raw) != "5" || m.ID != "" {
		t.Fatalf("scalar message = %+v, %v", m, err)
	}
	if err := json.Unmarshal([]byte(`{"id":7,"role":"user"}`), &m); err != nil || m.Role != "user" || m.ID != "" {
		t.Fatalf("odd message = %+v, %v", m, err)
	}
}

func TestConfigJSON(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, `{}`},
		{Config{Backend: SQLite, Path: "/d/x.db"}, `{"backend":"sqlite","path":"/d/x.db"}`},
		{Config{Backend: JSONL, Path: "/d", Compression: "none", BatchWindow: WriteThrough}, `{"backend":"jsonl","path":"/d","compression":"none","batchWindowMs":0}`},
		{Config{Backend: Postgres, URL: "postgresql://u@h:5432/db"}, `{"backend":"postgres","url":"postgresql://u@h:5432/db"}`},
		{Config{Backend: Postgres, URL: "postgresql://u@h:5432/db", Schema: "dsh", BatchWindow: 25 * time.Millisecond}, `{"backend":"postgres","url":"postgresql://u@h:5432/db","schema":"dsh","batchWindowMs":25}`},
		{Config{Backend: Postgres, URL: "postgresql://u@h/db", Schema: "app_1", ReadOnly: true}, `{"backend":"postgres","url":"postgresql://u@h/db","schema":"app_1","readOnly":true}`},
		{Config{BatchWindow: 1500 * time.Microsecond}, `{"batchWindowMs":2}`},
		{Config{Admission: Reference, EventTypes: []string{"myapp/note"}}, `{"admission":"reference","eventTypes":["myapp/note"]}`},
	} {
		if got, _ := c.cfg.json(); string(got) != c.want {
			t.Errorf("%+v: %s, want %s", c.cfg, got, c.want)
		}
	}
	if got, _ := (CreateOptions{Seed: []Event{}}).json(); string(got) != `{"seed":[]}` {
		t.Errorf("empty seed: %s", got)
	}
	if got, _ := (CreateOptions{}).json(); string(got) != `{}` {
		t.Errorf("no seed: %s", got)
	}
}

func TestPureFunctions(t *testing.T) {
	st := mustOpenStore(t, Config{EventTypes: testTypes})
	s := mustCreate(t, st, CreateOptions{})
	u, a := turn(t, s, 1)
	mustAppend(t, s, "user/message", userMsg("sum", "s"), Replace(u, a).From(u, a))
	mustAppend(t, s, "turn/start", map[string]int{"turn": 2}, nil)
	evs, _ := s.Events(0, End)

	f, err := FoldSurface(evs)
	if err != nil || !reflect.DeepEqual(f.Nodes, []uint64{6}) || len(f.Replacements) != 1 ||
		!reflect.DeepEqual(f.Replacements[0].ShadowedSeqs, []uint64{u, a}) {
		t.Fatalf("FoldSurface = %+v, %v", f, err)
	}
	rep, err := RepairEvents(evs)
	if err != nil || len(rep) != 1 || rep[0].Type != "turn/end" || rep[0].Seq != 8 {
		t.Fatalf("RepairEvents = %+v, %v", rep, err)
	}
	if msgs, err := DeriveMessages(nil); err != nil || len(msgs) != 0 {
		t.Fatalf("DeriveMessages(nil) = %v, %v", msgs, err)
	}
	evs[2].Seq = 9
	_, err = FoldSurface(evs)
	if e := wantErr(t, err, ErrRejected, "seq.gap"); e.Index != 2 {
		t.Fatalf("index %d", e.Index)
	}
}
