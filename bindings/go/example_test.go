package dshsession_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"

	dshsession "github.com/dsh-session/dsh-session/bindings/go"
)

// text returns the text of a message's first text block.
func text(m dshsession.Message) string {
	var blocks []struct{ Type, Text string }
	_ = json.Unmarshal(m.Content, &blocks)
	for _, b := range blocks {
		if b.Type == "text" {
			return b.Text
		}
	}
	return ""
}

// One agent turn, a refused compaction, a compaction replace and a fork, on
// a memory store (Config{Backend: dshsession.SQLite, Path: ...} for a file).
func Example_quickstart() {
	store, err := dshsession.OpenStore(dshsession.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	s, err := store.Create(dshsession.CreateOptions{ID: "demo", Cwd: "/home/demo"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// A turn: log-only events take a nil intent, messages a surface intent.
	must := func(ev dshsession.Event, err error) dshsession.Event {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%2d %s\n", ev.Seq, ev.Type)
		return ev
	}
	must(s.Append("turn/start", map[string]any{"turn": 1}, nil))
	u1 := must(s.Append("user/message", json.RawMessage(
		`{"id":"u1","role":"user","content":[{"type":"text","text":"What is in README.md?"}],"source":{"kind":"user"}}`),
		dshsession.Append()))
	must(s.Append("step/start", map[string]any{"turn": 1, "step": 1}, nil))
	a1 := must(s.Append("assistant/message", json.RawMessage(
		`{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"A session engine."}],`+
			`"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"}}}`),
		dshsession.Append().From()))
	must(s.Append("step/end", map[string]any{"turn": 1, "step": 1}, nil))
	must(s.Append("turn/end", json.RawMessage(`{"turn":1,"reason":{"kind":"completed"}}`), nil))

	// A compaction must cite every message it replaces.
	summary := json.RawMessage(`{"id":"sum1","role":"user","content":[{"type":"text","text":"Summary: README.md describes a session engine."}],"source":{"kind":"compaction"}}`)
	_, err = s.Append("user/message", summary, dshsession.Replace(u1.Seq, a1.Seq).From(u1.Seq))
	var e *dshsession.Error
	if errors.Is(err, dshsession.ErrRejected) && errors.As(err, &e) {
		fmt.Println("refused:", e.Rule)
	}
	must(s.Append("user/message", summary, dshsession.Replace(u1.Seq, a1.Seq).From(u1.Seq, a1.Seq)))

	msgs, err := s.Derive()
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s %s: %s\n", m.Role, m.ID, text(m))
	}

	child, err := s.Fork(dshsession.LastEvent, "demo-fork")
	if err != nil {
		log.Fatal(err)
	}
	defer child.Close()
	info, err := child.Info()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("fork %s of %s: %d events\n", child.ID(), child.Header().ParentSession, info.Length)
	if err := s.Flush(); err != nil {
		log.Fatal(err)
	}

	// Output:
	//  0 turn/start
	//  1 user/message
	//  2 step/start
	//  3 assistant/message
	//  4 step/end
	//  5 turn/end
	// refused: surface.replace-uncovered
	//  6 user/message
	// user sum1: Summary: README.md describes a session engine.
	// fork demo-fork of demo: 8 events
}

// A store observer hears what happens to every session of the store, inside
// the call that caused it: here it prints each notice and reads the
// session's length from inside the observer. An append from inside it to
// the same session is refused (append.reentrant).
func ExampleStore_SetObserver() {
	store, err := dshsession.OpenStore(dshsession.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	var s *dshsession.Session
	err = store.SetObserver(func(n dshsession.Notice) {
		switch n.Kind {
		case dshsession.NoticeCreated:
			fmt.Println(n.SessionID, "created, header id", n.Header.ID)
		case dshsession.NoticeEvent:
			info, _ := s.Info() // reading the session is fine
			fmt.Printf("%s event %d %s, length %d\n", n.SessionID, n.Event.Seq, n.Event.Type, info.Length)
			_, err := s.Append("turn/end", nil, nil)
			var e *dshsession.Error
			if errors.Is(err, dshsession.ErrConflict) && errors.As(err, &e) {
				fmt.Println("  append from the observer refused:", e.Rule)
			}
		case dshsession.NoticeFlush:
			fmt.Println(n.SessionID, "flush ok:", n.Flush.OK)
		default:
			fmt.Println(n.SessionID, n.Kind)
		}
	})
	if err != nil {
		log.Fatal(err)
	}

	s, err = store.Create(dshsession.CreateOptions{ID: "watched"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Append("turn/start", map[string]any{"turn": 1}, nil); err != nil {
		log.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}
	if err := store.SetObserver(nil); err != nil { // nil removes it
		log.Fatal(err)
	}

	// Output:
	// watched created, header id watched
	// watched event 0 turn/start, length 1
	//   append from the observer refused: append.reentrant
	// watched flush ok: true
	// watched disposed
}
