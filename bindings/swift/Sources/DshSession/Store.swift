import CDshSession
import Foundation

/// Where a store keeps its sessions (the `config_json` of `dsh_store_open`).
public struct StoreConfig: Encodable, Hashable, Sendable {
    /// The storage backend.
    public enum Backend: String, Encodable, Sendable {
        /// Sessions live as long as the store.
        case memory
        /// One SQLite database file (the reference's schema).
        case sqlite
        /// A directory of per-session JSONL logs.
        case jsonl
        /// One schema of a PostgreSQL database, which many stores and
        /// machines may share (the server keeps one writer per session).
        case postgres
    }

    /// JSONL frame encoding.
    public enum Compression: String, Encodable, Sendable {
        case zstd, none
    }

    /// How appends are admitted.
    public enum Admission: String, Codable, Sendable {
        /// Refuse at append whatever a later open would refuse (the default):
        /// an undeclared event type, a malformed message, …
        case strict
        /// The reference engine's permissive append, byte for byte.
        case reference
    }

    public var backend: Backend
    /// The database file (sqlite) or directory (jsonl); postgres takes `url`.
    public var path: String?
    /// postgres only, and required there: the connection URL,
    /// `postgresql://user@host:port/db`. Error messages name `host:port/db`,
    /// never the password.
    public var url: String?
    /// postgres only: the schema that holds the store's tables, created on
    /// first open; the library's default is `dsh`. 1 to 63 lowercase letters,
    /// digits and `_`, not starting with a digit or `pg_`.
    public var schema: String?
    /// jsonl only; the library's default is `.zstd`.
    public var compression: Compression?
    /// The write-behind window in milliseconds; 0 writes inside each append.
    /// The library's default is 25.
    public var batchWindowMs: Int?
    /// The library's default is `.strict`.
    public var admission: Admission?
    /// The host's own event types (`"myapp/note"`): log-only events that
    /// append accepts and every open reads. Core types cannot be declared.
    public var eventTypes: [String]?
    /// A reader beside the store's writer (in this process or another): no
    /// lock, no write, no repair; creating, appending, forking and deleting
    /// throw `.conflict` (`store.read-only`). The store must exist.
    public var readOnly: Bool?
    /// SQLite writers: `.shared` (the default) admits readers beside the
    /// writer; `.exclusive` keeps the WAL index out of shared memory.
    public var locking: Locking?

    /// A SQLite writer's locking mode.
    public enum Locking: String, Encodable, Sendable {
        case shared, exclusive
    }

    public init(backend: Backend, path: String? = nil, url: String? = nil, schema: String? = nil,
                compression: Compression? = nil, batchWindowMs: Int? = nil,
                admission: Admission? = nil, eventTypes: [String]? = nil, readOnly: Bool? = nil,
                locking: Locking? = nil) {
        self.backend = backend
        self.path = path
        self.url = url
        self.schema = schema
        self.compression = compression
        self.batchWindowMs = batchWindowMs
        self.admission = admission
        self.eventTypes = eventTypes
        self.readOnly = readOnly
        self.locking = locking
    }

    /// An in-memory store.
    public static let memory = StoreConfig(backend: .memory)

    /// An in-memory store that declares `eventTypes` (and takes `admission`).
    public static func memory(eventTypes: [String]?, admission: Admission? = nil) -> StoreConfig {
        StoreConfig(backend: .memory, admission: admission, eventTypes: eventTypes)
    }

    /// An SQLite database file (created when missing).
    public static func sqlite(path: String, batchWindowMs: Int? = nil, eventTypes: [String]? = nil,
                              admission: Admission? = nil) -> StoreConfig {
        StoreConfig(backend: .sqlite, path: path, batchWindowMs: batchWindowMs, admission: admission,
                    eventTypes: eventTypes)
    }

    /// A directory of JSONL session logs (created when missing).
    public static func jsonl(directory: String, compression: Compression? = nil,
                             batchWindowMs: Int? = nil, eventTypes: [String]? = nil,
                             admission: Admission? = nil) -> StoreConfig {
        StoreConfig(backend: .jsonl, path: directory, compression: compression, batchWindowMs: batchWindowMs,
                    admission: admission, eventTypes: eventTypes)
    }

    /// A schema of a PostgreSQL database (`schema` nil: `dsh`; created when
    /// missing), e.g. `.postgres(url: "postgresql://app@db.internal:5432/agents")`.
    public static func postgres(url: String, schema: String? = nil, batchWindowMs: Int? = nil,
                                eventTypes: [String]? = nil, admission: Admission? = nil) -> StoreConfig {
        StoreConfig(backend: .postgres, url: url, schema: schema, batchWindowMs: batchWindowMs,
                    admission: admission, eventTypes: eventTypes)
    }
}

/// A session as `Store.list()` reports it.
public struct StoredSession: Decodable, Hashable, Sendable {
    /// The session id.
    public var id: String
    /// Creation time, Unix epoch milliseconds.
    public var createdAt: Int?
    /// The store's opaque revision token.
    public var revision: JSONValue?
    /// The number of stored events, when the backend reports it.
    public var length: Int?
    /// Every field of the listing, including the header fields (`cwd`, `parentSession`, …).
    public var fields: [String: JSONValue]

    private enum CodingKeys: String, CodingKey { case id, createdAt, revision, length }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        createdAt = try container.decodeIfPresent(Int.self, forKey: .createdAt)
        revision = try container.decodeIfPresent(JSONValue.self, forKey: .revision)
        length = try container.decodeIfPresent(Int.self, forKey: .length)
        fields = try decoder.singleValueContainer().decode([String: JSONValue].self)
    }
}

/// What `Store.inspect(_:)` reads from a stored session, without changing it.
public struct Inspection: Decodable, Hashable, Sendable {
    public var header: SessionHeader
    /// The store's opaque revision token.
    public var revision: JSONValue?
    /// Whether a torn tail would be cut on open.
    public var torn: Bool
    /// The stored log followed by the closers crash repair would append.
    public var events: [Event]
    /// Those closers alone.
    public var repair: [Event]
    /// The events an open refuses one by one (an undeclared type, a
    /// malformed message or request header), read as stored.
    public var problems: [Problem]?
    /// The torn tail an open would cut, if any.
    public var tornTail: TornTail?
    /// The copies earlier repairs kept of what they cut (paths beside the
    /// log, oldest first).
    public var quarantined: [String]?

    /// One event of an inspected log that an open refuses.
    public struct Problem: Decodable, Hashable, Sendable {
        public var seq: Int
        /// The rule id (`load.unknown-type`, `msg.content`, …).
        public var rule: String
        /// The status an open gives, e.g. `DSH_E_SCHEMA_MISMATCH`.
        public var status: String
        public var message: String
    }
}

/// What crash repair cuts from the end of a log: where it begins (a byte
/// offset of a JSONL log, the seq of a SQLite row), how much (bytes or
/// rows) and why (`partial-line`, `incomplete-frame`, `zero-filled`,
/// `undecodable-rows`, `salvaged`).
public struct TornTail: Decodable, Hashable, Sendable {
    public var at: Int
    public var length: Int
    public var why: String
}

/// A torn tail an open or a repair cut, and the quarantine file beside the
/// log that holds a copy of its bytes (written before the cut).
public struct Cut: Decodable, Hashable, Sendable {
    public var at: Int
    public var length: Int
    public var why: String
    public var copy: String
}

/// What `Store.repair` found and did.
public struct RepairReport: Decodable, Hashable, Sendable {
    /// Whether the repair was written.
    public var applied: Bool
    /// The torn tail found, if any.
    public var tornTail: TornTail?
    /// The closers of the interrupted turn.
    public var repaired: [Event]
    /// What the repair cut and where its copy is.
    public var cut: Cut?
}

/// A lifecycle notice delivered to a store's observer.
public struct StoreNotice: Sendable {
    /// The kind of notice. Open: newer libraries may add kinds.
    public struct Kind: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// A session was created (payload: its header).
        public static let created = Kind(rawValue: "created")
        /// An event was committed (payload: the event).
        public static let event = Kind(rawValue: "event")
        /// A session flush (the durability barrier) finished (payload:
        /// `{"ok":true}` or `{"ok":false,"rule":…}`); background writes send none.
        public static let flush = Kind(rawValue: "flush")
        /// A session handle was released (payload: `null`).
        public static let disposed = Kind(rawValue: "disposed")
    }

    /// The session the notice is about.
    public let sessionId: String
    public let kind: Kind
    /// The payload JSON text, exactly as the library sent it.
    public let payloadJSON: String

    /// The payload as a JSON value (`.null` if it does not parse).
    public var payload: JSONValue { (try? JSONValue(parsing: payloadJSON)) ?? .null }

    /// For `.event` notices: the committed event.
    public var event: Event? {
        guard kind == .event else { return nil }
        return try? decodeJSON(Event.self, from: Data(payloadJSON.utf8))
    }
}

/// Holds an observer closure for the C callback; kept alive by its store.
final class ObserverBox {
    let handler: @Sendable (StoreNotice) -> Void
    init(_ handler: @escaping @Sendable (StoreNotice) -> Void) { self.handler = handler }
}

/// An open store: the owner of sessions on one backend.
///
/// Close it with `close()` (idempotent) to see whether draining the pending
/// writes succeeded; otherwise `deinit` closes it. Sessions keep their store
/// alive, so stores and sessions can be closed in any order. Safe to use from
/// any thread.
///
/// (`@unchecked Sendable`: the handle pointer is guarded by a reader-writer
/// lock, and the library itself makes every call on a handle thread-safe.)
public final class Store: @unchecked Sendable {
    /// The backend, as the library reports it (`"memory"`, `"sqlite"`, `"jsonl"`, `"postgres"`).
    public let backend: String

    private var handle: OpaquePointer?
    private let lock = HandleLock()
    /// Every observer ever installed: the library may call one until the store
    /// and all its sessions are closed, and sessions keep this object alive.
    private var observers: [ObserverBox] = []
    private let observersLock = NSLock()

    /// Opens a store (a memory store by default).
    public convenience init(_ config: StoreConfig = .memory) throws {
        try self.init(configJSON: try encodeJSON(config, what: "StoreConfig"))
    }

    /// Opens a store from the library's configuration JSON (`nil`: a memory store).
    public init(configJSON: String?) throws {
        try ABICheck.check()
        if let configJSON { try checkText(configJSON, "configJSON") }
        var opened: OpaquePointer?
        let data = try withOptionalCString(configJSON) { config in
            try ffiCall { dsh_store_open(config, &opened, $0) }
        }
        struct Opened: Decodable { var backend: String? }
        backend = (try? JSONDecoder().decode(Opened.self, from: data))?.backend ?? "unknown"
        handle = try createdHandle(opened, "dsh_store_open")
    }

    deinit {
        if let handle { dsh_store_close(handle, nil) }
    }

    /// Whether `close()` was called.
    public var isClosed: Bool { lock.shared { handle == nil } }

    /// Runs `body` with the open handle, or throws `.closed`.
    func withHandle<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        try lock.shared {
            guard let handle else { throw DshError.closed("store") }
            return try body(handle)
        }
    }

    /// Drains every pending write, then releases the store. A second call does
    /// nothing. Sessions opened from the store stay usable.
    ///
    /// - Throws: `DshError` (`.io`) when the final drain failed; the store is
    ///   released all the same.
    public func close() throws {
        let taken: OpaquePointer? = lock.exclusive {
            defer { handle = nil }
            return handle
        }
        guard let taken else { return }
        _ = try ffiCall { dsh_store_close(taken, $0) }
    }

    /// Creates a session.
    ///
    /// - Throws: `DshError`: `.conflict` (id in use), `.rejected` (seed rules,
    ///   with the seed `index`), `.invalidJSON`, `.io`, `.closed`.
    public func createSession(_ options: SessionOptions = SessionOptions()) throws -> Session {
        try createSession(optionsJSON: try encodeJSON(options, what: "SessionOptions"))
    }

    /// Creates a session with the given id and no seed.
    public func createSession(id: String) throws -> Session {
        try createSession(SessionOptions(id: id))
    }

    /// Creates a session from the library's options JSON (`nil`: a generated id).
    public func createSession(optionsJSON: String?) throws -> Session {
        if let optionsJSON { try checkText(optionsJSON, "optionsJSON") }
        var created: OpaquePointer?
        let data = try withHandle { store in
            try withOptionalCString(optionsJSON) { options in
                try ffiCall { dsh_session_create(store, options, &created, $0) }
            }
        }
        return try Session.adopt(created, "dsh_session_create", store: self) {
            (try decodeJSON(SessionHeader.self, from: data), [])
        }
    }

    /// Opens a stored session: loads it, runs crash repair (closing an
    /// interrupted turn), makes the repair durable. The closers appended are in
    /// the session's `repaired`.
    ///
    /// - Throws: `DshError`: `.notFound`, `.conflict` (already open),
    ///   `.corrupt`, `.schemaMismatch`, `.io`, `.closed`.
    public func openSession(_ id: String) throws -> Session {
        try open(id, "dsh_session_open") { dsh_session_open($0, $1, $2, $3) }
    }

    /// Opens a stored session like `openSession(_:)`, keeping only about the
    /// newest `window` events in memory: older events stay in storage and are
    /// read back when a call reaches them, so a session larger than memory
    /// opens. Every call answers as on a fully opened session. `nil` uses the
    /// library's default window (8192 events).
    ///
    /// - Throws: as `openSession(_:)`, plus `.invalidArgument` (`arg.window`)
    ///   for a negative window.
    public func openSessionWindowed(_ id: String, window: Int? = nil) throws -> Session {
        let options = window.map { "{\"window\":\($0)}" }
        return try withOptionalCString(options) { copts in
            try open(id, "dsh_session_open_windowed") {
                dsh_session_open_windowed($0, $1, copts, $2, $3)
            }
        }
    }

    /// One of the open calls (`call(store, id, &session, out)`): the
    /// session and the closers repair appended, from `{"header","repaired"}`.
    private func open(
        _ id: String, _ function: String,
        _ call: (OpaquePointer, UnsafePointer<CChar>, UnsafeMutablePointer<OpaquePointer?>,
                 UnsafeMutablePointer<dsh_buf>) -> dsh_status
    ) throws -> Session {
        try checkText(id, "id")
        var opened: OpaquePointer?
        let data = try withHandle { store in
            try id.withCString { cid in try ffiCall { call(store, cid, &opened, $0) } }
        }
        struct Opened: Decodable {
            var header: SessionHeader
            var repaired: [Event]
        }
        return try Session.adopt(opened, function, store: self) {
            let result = try decodeJSON(Opened.self, from: data)
            return (result.header, result.repaired)
        }
    }

    // MARK: Async variants of the calls that may block for long

    /// Opens a store without blocking the calling task's thread: a store's
    /// open may read and check a large database first.
    public static func open(_ config: StoreConfig = .memory) async throws -> Store {
        try await offload { try Store(config) }
    }

    /// `openSession(_:)` on a thread of its own: opening reads and checks
    /// the whole log, seconds for a large session.
    public func openSession(_ id: String) async throws -> Session {
        try await offload { try self.openSession(id) }
    }

    /// `openSessionWindowed(_:window:)` on a thread of its own.
    public func openSessionWindowed(_ id: String, window: Int? = nil) async throws -> Session {
        try await offload { try self.openSessionWindowed(id, window: window) }
    }

    /// The stored sessions.
    public func list() throws -> [StoredSession] {
        try withHandle { store in try ffiCallDecoding([StoredSession].self) { dsh_store_list(store, $0) } }
    }

    /// Reads a stored session without changing anything (works while it is open).
    public func inspect(_ id: String) throws -> Inspection {
        try checkText(id, "id")
        return try withHandle { store in
            try id.withCString { cid in try ffiCallDecoding(Inspection.self) { dsh_store_inspect(store, cid, $0) } }
        }
    }

    /// Repairs a stored session that is not open, as an open would, without
    /// a handle: a torn tail is cut after a copy of it is kept beside the
    /// log, an interrupted turn gets its closers. `dryRun` writes nothing;
    /// `salvage` also cuts damage an open refuses (keeping a copy).
    ///
    /// - Throws: `DshError`: `.notFound`, `.conflict` (`load.live-prepare`),
    ///   `.corrupt`, `.io` (`quarantine.full`), `.closed`.
    public func repair(_ id: String, dryRun: Bool = false, salvage: Bool = false) throws -> RepairReport {
        try checkText(id, "id")
        let options = "{\"dryRun\":\(dryRun),\"salvage\":\(salvage)}"
        return try withHandle { store in
            try id.withCString { cid in
                try options.withCString { copts in
                    try ffiCallDecoding(RepairReport.self) { dsh_store_repair(store, cid, copts, $0) }
                }
            }
        }
    }

    /// Deletes a stored session that is not open.
    ///
    /// - Throws: `DshError`: `.notFound`, `.conflict` (`store.delete-live`), `.io`, `.closed`.
    public func delete(_ id: String) throws {
        try checkText(id, "id")
        _ = try withHandle { store in
            try id.withCString { cid in try ffiCall { dsh_store_delete(store, cid, $0) } }
        }
    }

    /// Installs (or, with `nil`, removes) the store's lifecycle observer.
    ///
    /// The handler runs on the thread that made the change, after the
    /// session's lock is released. It may read sessions (`derive()`,
    /// `events()`, …); an append to the same session from inside it is refused
    /// (`append.reentrant`), and it must not close the session or store whose
    /// call triggered it. The store keeps the handler alive for as long as
    /// it lives, so capture sessions weakly (`[weak session]`).
    public func setObserver(_ handler: (@Sendable (StoreNotice) -> Void)?) throws {
        guard let handler else {
            _ = try withHandle { store in try ffiCall { dsh_store_set_observer(store, nil, nil, $0) } }
            return
        }
        let box = ObserverBox(handler)
        observersLock.lock()
        observers.append(box)
        observersLock.unlock()
        _ = try withHandle { store in
            try ffiCall {
                dsh_store_set_observer(store, { userData, sessionId, kind, payload in
                    guard let userData else { return }
                    let box = Unmanaged<ObserverBox>.fromOpaque(userData).takeUnretainedValue()
                    box.handler(StoreNotice(
                        sessionId: sessionId.map { String(cString: $0) } ?? "",
                        kind: StoreNotice.Kind(rawValue: kind.map { String(cString: $0) } ?? ""),
                        payloadJSON: payload.map { String(cString: $0) } ?? "null"))
                }, Unmanaged.passUnretained(box).toOpaque(), $0)
            }
        }
    }
}
