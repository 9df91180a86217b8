package dshsession

/*
#include "dsh_session.h"
*/
import "C"

import (
	"encoding/json"
)

// Fold is the pure surface fold of a complete log (FoldSurface).
type Fold struct {
	// Nodes are the surface seqs in surface order.
	Nodes []uint64 `json:"nodes"`
	// Replacements lists every replace and the nodes it shadowed.
	Replacements []Replacement `json:"replacements"`
}

// Replacement is one replace of a Fold.
type Replacement struct {
	Seq          uint64   `json:"seq"`          // the replacing event
	Start        uint64   `json:"start"`        // the replaced range, inclusive
	End          uint64   `json:"end"`          // the replaced range, inclusive
	ShadowedSeqs []uint64 `json:"shadowedSeqs"` // the surface nodes it removed
}

// pure runs a handle-less function on a complete log (seqs from 0).
func pure(op string, events []Event, f func(in *C.char, out *C.dsh_buf) C.dsh_status, v any) error {
	in, err := json.Marshal(events)
	if err != nil {
		return bindingError(op, StatusInvalidJSON, "json.encode", err.Error())
	}
	if events == nil {
		in = []byte("[]")
	}
	args, err := cStrings(op, jsonArg("events", in))
	if err != nil {
		return err
	}
	defer freeAll(args)
	b, err := call(op, func(out *C.dsh_buf) C.dsh_status { return f(args[0].p, out) })
	if err != nil {
		return err
	}
	return decode(op, b, v)
}

// FoldSurface folds the surface of a complete log without a session
// (dsh_fold_surface). A broken rule fails with ErrRejected and the Index of
// the failing event.
func FoldSurface(events []Event) (Fold, error) {
	var f Fold
	err := pure("FoldSurface", events, func(in *C.char, out *C.dsh_buf) C.dsh_status {
		return C.dsh_fold_surface(in, out)
	}, &f)
	return f, err
}

// DeriveMessages derives the message list of a complete log without a
// session (dsh_derive_messages).
func DeriveMessages(events []Event) ([]Message, error) {
	var msgs []Message
	err := pure("DeriveMessages", events, func(in *C.char, out *C.dsh_buf) C.dsh_status {
		return C.dsh_derive_messages(in, out)
	}, &msgs)
	return msgs, err
}

// RepairEvents returns the closing events crash repair would append to a
// complete log (dsh_repair_events); empty when the log ends balanced.
func RepairEvents(events []Event) ([]Event, error) {
	var evs []Event
	err := pure("RepairEvents", events, func(in *C.char, out *C.dsh_buf) C.dsh_status {
		return C.dsh_repair_events(in, out)
	}, &evs)
	return evs, err
}

// DeriveEventMessage returns the message one event contributes to the
// derived history (dsh_derive_event_message), or nil when it contributes
// none (a log-only event, a turn marker).
func DeriveEventMessage(event Event) (*Message, error) {
	const op = "DeriveEventMessage"
	in, err := json.Marshal(event)
	if err != nil {
		return nil, bindingError(op, StatusInvalidJSON, "json.encode", err.Error())
	}
	args, err := cStrings(op, jsonArg("event", in))
	if err != nil {
		return nil, err
	}
	defer freeAll(args)
	b, err := call(op, func(out *C.dsh_buf) C.dsh_status { return C.dsh_derive_event_message(args[0].p, out) })
	if err != nil || nullToNil(b) == nil {
		return nil, err
	}
	var m Message
	if err := decode(op, b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}
