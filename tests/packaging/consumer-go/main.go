// A Go module outside the repository that requires the binding. Built by
// scripts/test-packaging.sh against an installed prefix (-tags
// dshsession_system: pkg-config finds dsh-session.pc; the rpath comes from
// CGO_LDFLAGS), and by scripts/test-dist.sh from a module proxy whose module
// carries the prebuilt static library (go get + go build, nothing else).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	dsh "github.com/dsh-session/dsh-session/bindings/go"
)

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "consumer-go: %s: %v\n", what, err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: consumer-go DIR")
		os.Exit(2)
	}
	db := filepath.Join(os.Args[1], "consumer.db")
	store, err := dsh.OpenStore(dsh.Config{Backend: dsh.SQLite, Path: db})
	if err != nil {
		fail("open", err)
	}
	events := 0
	if err := store.SetObserver(func(n dsh.Notice) {
		if n.Kind == dsh.NoticeEvent {
			events++
		}
	}); err != nil {
		fail("observer", err)
	}
	s, err := store.Create(dsh.CreateOptions{ID: "demo"})
	if err != nil {
		fail("create", err)
	}
	s.Append("turn/start", map[string]int{"turn": 1}, nil)
	_, err = s.Append("user/message", json.RawMessage(
		`{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`), dsh.Append())
	if err != nil {
		fail("append", err)
	}
	if err := s.Flush(); err != nil {
		fail("flush", err)
	}
	msgs, err := s.Derive()
	if err != nil {
		fail("derive", err)
	}
	if err := s.Close(); err != nil {
		fail("close", err)
	}
	if err := store.Close(); err != nil {
		fail("store close", err)
	}
	fmt.Printf("consumer-go: dsh-session %s (ABI %d): %d messages, %d event notices\n",
		dsh.Version(), dsh.ABIVersion(), len(msgs), events)
	if len(msgs) != 1 || events != 2 {
		os.Exit(1)
	}
}
