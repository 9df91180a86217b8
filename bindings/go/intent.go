package dshsession

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// OpKind tells which surface operation a SurfaceOp is.
type OpKind uint8

// The surface operations.
const (
	// OpNone is the zero SurfaceOp: no surface operation.
	OpNone OpKind = iota
	// OpAppend places the event at the end of the surface ("append").
	OpAppend
	// OpReplace replaces the surface nodes with seqs in [Start, End] by the
	// event ({"op":"replace","start":S,"end":E}).
	OpReplace
)

// SurfaceOp is the surfaceOp of an append: Append() or Replace(start, end).
// The zero value is no operation.
type SurfaceOp struct {
	// Kind is the operation.
	Kind OpKind
	// Start and End bound a replace (inclusive seqs); zero for an append.
	Start, End uint64
}

// Append returns the "append" surface operation.
func Append() SurfaceOp { return SurfaceOp{Kind: OpAppend} }

// Replace returns the surface operation {"op":"replace","start":start,"end":end}:
// the event replaces the surface nodes whose seqs lie in [start, end]. The
// intent must cite every shadowed node in its sources (see SurfaceOp.From).
func Replace(start, end uint64) SurfaceOp {
	return SurfaceOp{Kind: OpReplace, Start: start, End: end}
}

// From returns the intent made of op and the seqs of the earlier events the
// appended event was built from (sourceEventSeqs). With no seqs the intent
// has no sourceEventSeqs key; use Intent{Op: op, Sources: []uint64{}} for an
// explicit empty list.
func (op SurfaceOp) From(seqs ...uint64) Intent { return Intent{Op: op, Sources: seqs} }

// MarshalJSON encodes op as `"append"`, `{"op":"replace","start":S,"end":E}`
// or, for OpNone, `null`.
func (op SurfaceOp) MarshalJSON() ([]byte, error) {
	switch op.Kind {
	case OpNone:
		return []byte("null"), nil
	case OpAppend:
		return []byte(`"append"`), nil
	case OpReplace:
		b := []byte(`{"op":"replace","start":`)
		b = strconv.AppendUint(b, op.Start, 10)
		b = append(b, `,"end":`...)
		b = strconv.AppendUint(b, op.End, 10)
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("dshsession: unknown OpKind %d", op.Kind)
}

// UnmarshalJSON decodes the encodings MarshalJSON produces.
func (op *SurfaceOp) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*op = SurfaceOp{}
		return nil
	case string(b) == `"append"`:
		*op = Append()
		return nil
	}
	var r struct {
		Op         string
		Start, End *uint64
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Op != "replace" || r.Start == nil || r.End == nil {
		return fmt.Errorf("dshsession: not a surface operation: %s", b)
	}
	*op = Replace(*r.Start, *r.End)
	return nil
}

func (op SurfaceOp) surfaceIntent() Intent { return Intent{Op: op} }

// Intent is the surface intent of an append: the surface operation and the
// seqs of the events the new event was built from. Build one as a literal,
// Intent{Op: Append(), Sources: []uint64{4, 5}}, or with SurfaceOp.From,
// Append().From(4, 5).
type Intent struct {
	// Op is the surface operation (required on user/message,
	// assistant/message and tool/result, forbidden elsewhere).
	Op SurfaceOp
	// Sources is sourceEventSeqs; nil omits the key, a non-nil empty slice
	// sends [].
	Sources []uint64
	// Ignorable stores the event with the envelope's ignorable marker: every
	// reader keeps it as an opaque log-only event, even one that does not
	// know its type. Only for types outside the core vocabulary; ignored by
	// a Reference-admission store, as the reference ignores it.
	Ignorable bool
}

// IgnorableEvent is the intent of a log-only host event that readers which
// do not know its type keep as opaque (Intent{Ignorable: true}).
func IgnorableEvent() Intent { return Intent{Ignorable: true} }

func (i Intent) surfaceIntent() Intent { return i }

// SurfaceIntent is what Session.Append takes as its intent: a SurfaceOp
// (Append(), Replace(s, e)) or an Intent (Append().From(4, 5)). A nil
// SurfaceIntent, like the zero Intent, means the event carries none (the
// log-only types: turn/start, step/end, ...).
type SurfaceIntent interface {
	surfaceIntent() Intent
}

// intentJSON encodes an intent for the C ABI; nil means "pass NULL".
func intentJSON(si SurfaceIntent) []byte {
	if si == nil {
		return nil
	}
	i := si.surfaceIntent()
	if i.Op.Kind == OpNone && i.Sources == nil && !i.Ignorable {
		return nil
	}
	b := []byte{'{'}
	if i.Op.Kind != OpNone {
		op, err := i.Op.MarshalJSON()
		if err != nil {
			op = []byte(`"invalid"`) // an unknown OpKind: let the library reject it
		}
		b = append(append(b, `"surfaceOp":`...), op...)
	}
	if i.Sources != nil {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"sourceEventSeqs":[`...)
		for k, s := range i.Sources {
			if k > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, s, 10)
		}
		b = append(b, ']')
	}
	if i.Ignorable {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"ignorable":true`...)
	}
	return append(b, '}')
}

// BatchItem is one event of Session.AppendBatch.
type BatchItem struct {
	// Type is the event type, e.g. "user/message".
	Type string
	// Data is the event data, encoded as Session.Append encodes it.
	Data any
	// Intent is the surface intent, or nil.
	Intent SurfaceIntent
}

// encodeData encodes event data: a json.RawMessage verbatim, nil as null,
// anything else with encoding/json (without HTML escaping).
func encodeData(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return []byte("null"), nil
	case json.RawMessage:
		if x == nil {
			return []byte("null"), nil
		}
		return x, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func itemError(st Status, rule, msg string, index int) *Error {
	e := bindingError("Session.AppendBatch", st, rule, msg)
	e.Index = index
	return e
}

// batchJSON encodes a batch as [{"type":...,"data":...,"intent":...}, ...].
func batchJSON(items []BatchItem) ([]byte, error) {
	b := []byte{'['}
	for k, it := range items {
		if k > 0 {
			b = append(b, ',')
		}
		if !utf8.ValidString(it.Type) {
			return nil, itemError(StatusInvalidArgument, "arg.utf8", "batch item type is not valid UTF-8", k)
		}
		t, _ := json.Marshal(it.Type)
		d, err := encodeData(it.Data)
		if err != nil {
			return nil, itemError(StatusInvalidArgument, "arg.encode", err.Error(), k)
		}
		if !json.Valid(d) {
			// Caught here so that the error names the item, as the library's would.
			return nil, itemError(StatusInvalidJSON, "json.parse", "batch item data is not JSON", k)
		}
		b = append(append(append(append(b, `{"type":`...), t...), `,"data":`...), d...)
		if in := intentJSON(it.Intent); in != nil {
			b = append(append(b, `,"intent":`...), in...)
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}
