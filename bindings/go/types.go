package dshsession

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// End, as the to argument of Session.Events, means "to the end of the log"
// (UINT64_MAX in the C ABI).
const End uint64 = ^uint64(0)

// LastEvent, as the boundary of Session.Fork, means the source's last event.
const LastEvent int64 = -1

// Event is one event of a session log.
type Event struct {
	// Type is the event type, e.g. "user/message".
	Type string `json:"type"`
	// Seq is the event's index in the log.
	Seq uint64 `json:"seq"`
	// Time is the append time in Unix epoch milliseconds.
	Time int64 `json:"time"`
	// Data is the event data, exactly as stored.
	Data json.RawMessage `json:"data"`
	// SourceEventSeqs are the seqs of the events this one was built from;
	// nil when the key is absent, empty (non-nil) when it is [].
	SourceEventSeqs []uint64 `json:"sourceEventSeqs"`
	// SurfaceOp is the surface operation as stored ("append" or a replace
	// object), nil when absent. Event.Op decodes it.
	SurfaceOp json.RawMessage `json:"surfaceOp"`
	// Ignorable is true when the stored event carries "ignorable": true.
	Ignorable bool `json:"ignorable"`
	// Raw is the event exactly as the library returned it; nil for an Event
	// built in Go. MarshalJSON ignores it.
	Raw json.RawMessage `json:"-"`
}

// Op decodes SurfaceOp; it returns the zero SurfaceOp (OpNone) when the
// event has none or it is not a well-formed operation.
func (e Event) Op() SurfaceOp {
	var op SurfaceOp
	if e.SurfaceOp != nil && op.UnmarshalJSON(e.SurfaceOp) != nil {
		return SurfaceOp{}
	}
	return op
}

// MarshalJSON encodes the event envelope from its fields in the key order
// type, seq, time, data, sourceEventSeqs?, surfaceOp?, ignorable? (absent
// keys: nil SourceEventSeqs, nil SurfaceOp, false Ignorable). This is how
// events built in Go (or read back) are passed as a seed.
func (e Event) MarshalJSON() ([]byte, error) {
	t, err := json.Marshal(e.Type)
	if err != nil {
		return nil, err
	}
	b := append([]byte(`{"type":`), t...)
	b = strconv.AppendUint(append(b, `,"seq":`...), e.Seq, 10)
	b = strconv.AppendInt(append(b, `,"time":`...), e.Time, 10)
	b = append(b, `,"data":`...)
	if e.Data == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, e.Data...)
	}
	if e.SourceEventSeqs != nil {
		b = append(b, `,"sourceEventSeqs":[`...)
		for k, s := range e.SourceEventSeqs {
			if k > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, s, 10)
		}
		b = append(b, ']')
	}
	if e.SurfaceOp != nil {
		b = append(append(b, `,"surfaceOp":`...), e.SurfaceOp...)
	}
	if e.Ignorable {
		b = append(b, `,"ignorable":true`...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes an event and keeps its text in Raw.
func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*e = Event(p)
	e.Raw = clone(b)
	return nil
}

// Message is one message of the derived history (Session.Derive): the data
// of a user/message, or the message of an assistant/message or tool/result.
// The library does not validate live message data, so the typed fields are
// filled only when they have the expected JSON types; Raw always holds the
// message exactly, and is what to send to a model.
type Message struct {
	// ID is the message id ("id").
	ID string
	// Role is "user" or "assistant" ("role"; tool results are user-role).
	Role string
	// Content is the content block array ("content").
	Content json.RawMessage
	// Source is the source object ("source"), e.g. {"kind":"user"}.
	Source json.RawMessage
	// Raw is the message exactly as derived.
	Raw json.RawMessage
}

// MarshalJSON returns Raw when set, else the typed fields as an object.
func (m Message) MarshalJSON() ([]byte, error) {
	if m.Raw != nil {
		return m.Raw, nil
	}
	return json.Marshal(struct {
		ID      string          `json:"id,omitempty"`
		Role    string          `json:"role,omitempty"`
		Content json.RawMessage `json:"content,omitempty"`
		Source  json.RawMessage `json:"source,omitempty"`
	}{m.ID, m.Role, m.Content, m.Source})
}

// UnmarshalJSON keeps any JSON value in Raw and fills the typed fields that
// are present with the expected types.
func (m *Message) UnmarshalJSON(b []byte) error {
	*m = Message{Raw: clone(b)}
	var f map[string]json.RawMessage
	if json.Unmarshal(b, &f) != nil {
		return nil // not an object: only Raw
	}
	_ = json.Unmarshal(f["id"], &m.ID)
	_ = json.Unmarshal(f["role"], &m.Role)
	m.Content, m.Source = f["content"], f["source"]
	return nil
}

// Header is a session header (docs/events.md §13).
type Header struct {
	// Version is the header format version (0).
	Version int `json:"version"`
	// ID is the session id.
	ID string `json:"id"`
	// CreatedAt is the creation time in Unix epoch milliseconds.
	CreatedAt int64 `json:"createdAt"`
	// Cwd is the absolute working directory, if recorded.
	Cwd string `json:"cwd,omitempty"`
	// ParentSession is the session this one was forked from, if any.
	ParentSession string `json:"parentSession,omitempty"`
	// SeedLength is the number of events inherited through a fork seed.
	SeedLength uint64 `json:"seedLength,omitempty"`
	// Origin is a presentation hint ("subagent"), if any.
	Origin string `json:"origin,omitempty"`
	// DelegationDepth is 0 for a top-level session.
	DelegationDepth uint64 `json:"delegationDepth,omitempty"`
	// AgentPreset is a composition preset id, if any.
	AgentPreset string `json:"agentPreset,omitempty"`
	// Raw is the header exactly as returned (it keeps unknown keys).
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes a header and keeps its text in Raw.
func (h *Header) UnmarshalJSON(b []byte) error {
	type plain Header
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*h = Header(p)
	h.Raw = clone(b)
	return nil
}

// StoredSession is one entry of Store.List.
type StoredSession struct {
	// Header is the session header.
	Header Header
	// Revision is an opaque token that changes whenever the stored session does.
	Revision string
	// Raw is the entry exactly as returned.
	Raw json.RawMessage
}

// UnmarshalJSON decodes a list entry (header fields plus "revision").
func (s *StoredSession) UnmarshalJSON(b []byte) error {
	var r struct {
		Revision string `json:"revision"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	*s = StoredSession{Revision: r.Revision, Raw: clone(b)}
	return json.Unmarshal(b, &s.Header)
}

// Info is the state of an open session (Session.Info).
type Info struct {
	// ID is the session id.
	ID string `json:"id"`
	// Header is the session header.
	Header Header `json:"header"`
	// Length is the number of events in the log.
	Length uint64 `json:"length"`
	// FirstLiveSeq is the first seq appended live (after the seed).
	FirstLiveSeq uint64 `json:"firstLiveSeq"`
	// ReplaceGeneration counts the surface replaces so far.
	ReplaceGeneration uint64 `json:"replaceGeneration"`
	// OpenTurn is the data.turn of the open turn/start (usually a number),
	// nil when no turn is open.
	OpenTurn json.RawMessage `json:"openTurn"`
	// Admission is the store's admission ("strict" or "reference").
	Admission Admission `json:"admission"`
	// EventTypes are the host types the store declares.
	EventTypes []string `json:"eventTypes"`
	// Raw is the info object exactly as returned.
	Raw json.RawMessage `json:"-"`
}

// Surface is the live surface of a session (Session.Surface).
type Surface struct {
	// Nodes are the seqs of the surface events, in surface order.
	Nodes []uint64 `json:"nodes"`
	// ReplaceGeneration counts the surface replaces so far.
	ReplaceGeneration uint64 `json:"replaceGeneration"`
}

// Inspection is a stored session read without changing anything (Store.Inspect).
type Inspection struct {
	// Header is the session header.
	Header Header `json:"header"`
	// Revision is the stored revision token.
	Revision string `json:"revision"`
	// Torn reports whether opening would cut a torn tail.
	Torn bool `json:"torn"`
	// Events is the stored log followed by the closers crash repair would append.
	Events []Event `json:"events"`
	// Repair is those closers alone.
	Repair []Event `json:"repair"`
	// Problems are the events an open refuses one by one (an undeclared
	// type, a malformed message or request header), read as stored.
	Problems []Problem `json:"problems"`
	// TornTail is the torn tail opening would cut, or nil.
	TornTail *TornTail `json:"tornTail"`
	// Quarantined are the copies earlier repairs kept of what they cut
	// (paths beside the log, oldest first).
	Quarantined []string `json:"quarantined"`
	// Raw is the inspection object exactly as returned.
	Raw json.RawMessage `json:"-"`
}

// Problem is one event of an inspected log that an open refuses.
type Problem struct {
	// Seq is the event's seq.
	Seq uint64 `json:"seq"`
	// Rule is the rule id (load.unknown-type, msg.content, ...).
	Rule string `json:"rule"`
	// Status is the status an open gives, e.g. "DSH_E_SCHEMA_MISMATCH".
	Status string `json:"status"`
	// Message says what is wrong.
	Message string `json:"message"`
}

// nullToNil maps the JSON text null to nil.
func nullToNil(b []byte) json.RawMessage {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	return b
}

func clone(b []byte) json.RawMessage { return append(json.RawMessage(nil), b...) }

// TornTail is what crash repair cuts from the end of a log: where it
// begins (a byte offset of a JSONL log, the seq of a SQLite row), how much
// (bytes or rows) and why ("partial-line", "incomplete-frame",
// "zero-filled", "undecodable-rows", "salvaged").
type TornTail struct {
	At     uint64 `json:"at"`
	Length uint64 `json:"length"`
	Why    string `json:"why"`
}

// Cut is a torn tail an open or a repair cut, and Copy the quarantine file
// beside the log that holds a copy of its bytes, written before the cut.
type Cut struct {
	TornTail
	Copy string `json:"copy"`
}

// RepairOptions are Store.Repair's options.
type RepairOptions struct {
	// DryRun writes nothing and reports what a repair would do.
	DryRun bool `json:"dryRun"`
	// Salvage also cuts damage an open refuses (a zstd frame that fails
	// its checksum, bytes no crash leaves), keeping a copy.
	Salvage bool `json:"salvage"`
}

// RepairReport is what Store.Repair found and did.
type RepairReport struct {
	// Applied is true when the repair was written.
	Applied bool `json:"applied"`
	// TornTail is the torn tail found, or nil.
	TornTail *TornTail `json:"tornTail"`
	// Repaired are the closers of the interrupted turn.
	Repaired []Event `json:"repaired"`
	// Cut is what the repair cut and where its copy is, or nil.
	Cut *Cut `json:"cut"`
}
