package dshsession

import (
	"encoding/json"
	"time"
)

// Backend names a storage backend of Config.
type Backend string

// The storage backends.
const (
	// Memory keeps sessions in memory for the store's lifetime (the default).
	Memory Backend = "memory"
	// SQLite stores every session in one SQLite database file (Config.Path).
	SQLite Backend = "sqlite"
	// JSONL stores one log per session in a directory (Config.Path).
	JSONL Backend = "jsonl"
	// Postgres stores every session in one schema (Config.Schema) of a
	// PostgreSQL database (Config.URL), which many stores and machines may
	// share: the server keeps one writer per session.
	Postgres Backend = "postgres"
)

// Admission says how a store admits appends (Config.Admission).
type Admission string

// The admissions.
const (
	// Strict (the default) refuses at append whatever a later open would
	// refuse: an undeclared event type, a malformed message, ... (the rule
	// ids are admit.*, msg.*, seed.header-*).
	Strict Admission = "strict"
	// Reference is the reference engine's permissive append, byte for byte,
	// for hosts that share logs with it.
	Reference Admission = "reference"
)

// Locking is a SQLite writer's locking mode (Config.Locking).
type Locking string

// The locking modes.
const (
	// Shared (the default) lets readers (Config.ReadOnly) open the database
	// beside the writer.
	Shared Locking = "shared"
	// Exclusive keeps the writer's WAL index in its own memory (no -shm
	// file another process could truncate); once it has written, no reader
	// can open the database.
	Exclusive Locking = "exclusive"
)

// WriteThrough, as Config.BatchWindow, writes each append to storage before
// it returns (batchWindowMs 0).
const WriteThrough time.Duration = -1

// Config configures OpenStore. The zero Config is a memory store.
type Config struct {
	// Backend is the storage backend; "" means Memory.
	Backend Backend
	// Path is the SQLite database file or the JSONL directory (required for
	// those backends). Its parent must be a directory owned by the user and
	// not shared (not /tmp itself). Postgres takes URL instead.
	Path string
	// URL is the PostgreSQL connection URL, postgresql://user@host:port/db
	// (required for Postgres, refused by the other backends). Error messages
	// name host:port/db, never the password.
	URL string
	// Schema is the PostgreSQL schema that holds the store's tables, created
	// on first open; "" means "dsh". 1 to 63 lowercase letters, digits and _,
	// not starting with a digit or pg_. Postgres only.
	Schema string
	// Compression is "zstd" (the default) or "none"; JSONL only.
	Compression string
	// BatchWindow is the write-behind window: appends are written in the
	// background within it, and Session.Flush is the durability barrier.
	// 0 means the library default (25 ms); WriteThrough (any negative value)
	// writes inside each append. Positive values are rounded up to whole
	// milliseconds.
	BatchWindow time.Duration
	// Admission is Strict ("" means Strict) or Reference.
	Admission Admission
	// EventTypes declares the host's own event types ("myapp/note"): log-only
	// events that append accepts and every open reads. Names follow the core
	// types' grammar; core types cannot be declared.
	EventTypes []string
	// ReadOnly opens the store as a reader beside its writer (in this
	// process or another): no lock, no write, no repair; Create, Append,
	// Fork and Delete fail with rule store.read-only. The store must exist.
	ReadOnly bool
	// Locking is Shared ("" means Shared) or Exclusive; SQLite writers only.
	Locking Locking
}

func (c Config) json() ([]byte, error) {
	var ms *int64
	switch {
	case c.BatchWindow < 0:
		ms = new(int64)
	case c.BatchWindow > 0:
		v := int64((c.BatchWindow + time.Millisecond - 1) / time.Millisecond)
		ms = &v
	}
	return json.Marshal(struct {
		Backend     Backend   `json:"backend,omitempty"`
		Path        string    `json:"path,omitempty"`
		URL         string    `json:"url,omitempty"`
		Schema      string    `json:"schema,omitempty"`
		Compression string    `json:"compression,omitempty"`
		BatchWindow *int64    `json:"batchWindowMs,omitempty"`
		Admission   Admission `json:"admission,omitempty"`
		EventTypes  []string  `json:"eventTypes,omitempty"`
		ReadOnly    bool      `json:"readOnly,omitempty"`
		Locking     Locking   `json:"locking,omitempty"`
	}{c.Backend, c.Path, c.URL, c.Schema, c.Compression, ms, c.Admission, c.EventTypes, c.ReadOnly, c.Locking})
}

// CreateOptions configures Store.Create. The zero value creates an empty
// session with a generated id.
type CreateOptions struct {
	// ID is the session id; "" lets the library generate one.
	ID string
	// Seed, when non-nil (an empty slice too), is a complete log (seqs from
	// 0) the session starts from; a session/end-seed marker is then appended
	// unless the seed ends with one. Seeds are validated by the seed rules.
	Seed []Event
	// Legacy accepts message events without surface markers as appends
	// (logs that predate markers; see docs/decisions.md).
	Legacy bool
	// Cwd is the absolute working directory recorded in the header.
	Cwd string
	// ParentSession is the lineage recorded in the header.
	ParentSession string
	// Origin is a presentation hint ("subagent").
	Origin string
	// DelegationDepth is recorded when non-zero.
	DelegationDepth uint64
	// AgentPreset is a composition preset id.
	AgentPreset string
}

func (o CreateOptions) json() ([]byte, error) {
	var seed *[]Event
	if o.Seed != nil {
		seed = &o.Seed
	}
	return json.Marshal(struct {
		ID              string   `json:"id,omitempty"`
		Seed            *[]Event `json:"seed,omitempty"`
		Legacy          bool     `json:"legacy,omitempty"`
		Cwd             string   `json:"cwd,omitempty"`
		ParentSession   string   `json:"parentSession,omitempty"`
		Origin          string   `json:"origin,omitempty"`
		DelegationDepth uint64   `json:"delegationDepth,omitempty"`
		AgentPreset     string   `json:"agentPreset,omitempty"`
	}{o.ID, seed, o.Legacy, o.Cwd, o.ParentSession, o.Origin, o.DelegationDepth, o.AgentPreset})
}
