import CDshSession
import Foundation

/// The header of a session (kept outside its event log).
public struct SessionHeader: Codable, Hashable, Sendable {
    /// The session format version (0).
    public var version: Int
    public var id: String
    /// Creation time, Unix epoch milliseconds.
    public var createdAt: Int
    /// The working directory (an absolute path).
    public var cwd: String?
    /// The session this one was forked from.
    public var parentSession: String?
    /// The number of events inherited through a fork seed.
    public var seedLength: Int?
    /// A presentation hint (`"subagent"`).
    public var origin: String?
    /// 0 or absent for a top-level session.
    public var delegationDepth: Int?
    /// A composition preset id.
    public var agentPreset: String?

    public init(version: Int = 0, id: String, createdAt: Int, cwd: String? = nil, parentSession: String? = nil,
                seedLength: Int? = nil, origin: String? = nil, delegationDepth: Int? = nil,
                agentPreset: String? = nil) {
        self.version = version
        self.id = id
        self.createdAt = createdAt
        self.cwd = cwd
        self.parentSession = parentSession
        self.seedLength = seedLength
        self.origin = origin
        self.delegationDepth = delegationDepth
        self.agentPreset = agentPreset
    }
}

/// The options of `Store.createSession(_:)`.
public struct SessionOptions: Encodable, Hashable, Sendable {
    /// The session id; generated when nil.
    public var id: String?
    /// Complete events (with `seq` 0, 1, …) to start from; the session then
    /// appends `session/end-seed` unless the seed ends with one.
    public var seed: [Event]?
    /// Accept message events without surface markers as appends (legacy logs).
    public var legacy: Bool?
    public var cwd: String?
    public var parentSession: String?
    public var origin: String?
    public var delegationDepth: Int?
    public var agentPreset: String?

    public init(id: String? = nil, seed: [Event]? = nil, legacy: Bool? = nil, cwd: String? = nil,
                parentSession: String? = nil, origin: String? = nil, delegationDepth: Int? = nil,
                agentPreset: String? = nil) {
        self.id = id
        self.seed = seed
        self.legacy = legacy
        self.cwd = cwd
        self.parentSession = parentSession
        self.origin = origin
        self.delegationDepth = delegationDepth
        self.agentPreset = agentPreset
    }
}

/// A summary of a live session (`Session.info()`).
public struct SessionInfo: Decodable, Hashable, Sendable {
    public var id: String
    public var header: SessionHeader
    /// The number of events in the log.
    public var length: Int
    /// The first seq of the live (non-seeded) part.
    public var firstLiveSeq: Int
    /// How many replaces changed the surface so far.
    public var replaceGeneration: Int
    /// The open turn number, or nil between turns.
    public var openTurn: Int?
    /// The store's admission.
    public var admission: StoreConfig.Admission?
    /// The host event types the store declares.
    public var eventTypes: [String]?
}

/// The live surface: the seqs of the events the derived history comes from.
public struct Surface: Decodable, Hashable, Sendable {
    /// The seqs of the surface nodes, in surface order.
    public var nodes: [Int]
    /// How many replaces changed the surface so far.
    public var replaceGeneration: Int

    public init(nodes: [Int], replaceGeneration: Int) {
        self.nodes = nodes
        self.replaceGeneration = replaceGeneration
    }
}

/// A position in a session's derived history, handed back to
/// `Session.deriveSince(_:)` to get only what was added after it.
public struct DeriveCursor: Hashable, Sendable {
    /// The surface generation the position belongs to.
    public var generation: UInt64
    /// The number of messages already held.
    public var count: UInt64

    public init(generation: UInt64, count: UInt64) {
        self.generation = generation
        self.count = count
    }

    /// The cursor of a host that holds nothing yet.
    public static let start = DeriveCursor(generation: 0, count: 0)
}

/// The answer of `Session.deriveSince(_:)`.
public struct DerivedMessages: Decodable, Hashable, Sendable {
    public var generation: UInt64
    public var count: UInt64
    /// `false`: `messages` are the ones added since the cursor (append them);
    /// `true`: a replace happened (or the cursor was unknown) and `messages`
    /// is the whole history (replace what you held).
    public var reset: Bool
    public var messages: [Message]

    /// The cursor to pass to the next call.
    public var cursor: DeriveCursor { DeriveCursor(generation: generation, count: count) }
}

/// An open session: an append-only log of events whose surface gives the
/// message history an agent sends to its model.
///
/// Create one with `Store.createSession`, `Store.openSession` or `fork`.
/// Appends never wait for the disk; `flush()` is the durability barrier.
/// `close()` (idempotent) drains this session's writes and reports a failure;
/// otherwise `deinit` closes it. Safe to use from any thread and from
/// concurrent tasks: the library serializes calls on one session.
///
/// (`@unchecked Sendable`: the handle pointer is guarded by a reader-writer
/// lock, and the library itself makes every call on a handle thread-safe.)
public final class Session: @unchecked Sendable {
    /// The header returned when the session was created, opened or forked.
    public let header: SessionHeader
    /// The closing events crash repair appended when the session was opened
    /// (empty for created and forked sessions).
    public let repaired: [Event]
    /// The store the session belongs to (kept alive by the session).
    public let store: Store

    private var handle: OpaquePointer?
    private let lock = HandleLock()

    /// The session id.
    public var id: String { header.id }

    init(handle: OpaquePointer, store: Store, header: SessionHeader, repaired: [Event]) {
        self.handle = handle
        self.store = store
        self.header = header
        self.repaired = repaired
    }

    /// Wraps the handle a constructor (`function`) just returned; releases it
    /// again when its result does not decode.
    static func adopt(
        _ handle: OpaquePointer?, _ function: String, store: Store,
        _ parse: () throws -> (header: SessionHeader, repaired: [Event])
    ) throws -> Session {
        let handle = try createdHandle(handle, function)
        do {
            let (header, repaired) = try parse()
            return Session(handle: handle, store: store, header: header, repaired: repaired)
        } catch {
            dsh_session_close(handle, nil)
            throw error
        }
    }

    deinit {
        if let handle { dsh_session_close(handle, nil) }
    }

    /// Whether `close()` was called.
    public var isClosed: Bool { lock.shared { handle == nil } }

    private func withHandle<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        try lock.shared {
            guard let handle else { throw DshError.closed("session") }
            return try body(handle)
        }
    }

    /// Drains this session's pending writes, then releases it. A second call does nothing.
    ///
    /// - Throws: `DshError` (`.io`) when the drain failed; the session is released all the same.
    public func close() throws {
        let taken: OpaquePointer? = lock.exclusive {
            defer { handle = nil }
            return handle
        }
        guard let taken else { return }
        _ = try ffiCall { dsh_session_close(taken, $0) }
    }

    // MARK: Appending

    /// Appends one event and returns it as committed (with its `seq` and `time`).
    ///
    /// - Parameters:
    ///   - type: the event type, e.g. `"user/message"`.
    ///   - data: its data (for `user/message` the message itself).
    ///   - intent: the surface intent; required on the surface types
    ///     (`user/message`, `assistant/message`, `tool/result`), nil otherwise.
    /// - Throws: `DshError`: `.rejected` with the rule (`surface.*`, …) when
    ///   the event breaks a session rule (nothing changed), `.invalidJSON`
    ///   (`json.*`), `.conflict` (`append.reentrant`), `.closed`, `.io`.
    @discardableResult
    public func append(_ type: String, data: JSONValue, intent: Intent? = nil) throws -> Event {
        try append(type, dataJSON: data.jsonString(), intentJSON: try intentText(intent))
    }

    /// Appends one event whose data is any `Encodable` value (e.g. a `Message`).
    @discardableResult
    public func append<T: Encodable>(_ type: String, data: T, intent: Intent? = nil) throws -> Event {
        try append(type, dataJSON: try encodeJSON(data, what: "data"), intentJSON: try intentText(intent))
    }

    /// Appends one event given as JSON text (kept byte for byte, key order included).
    @discardableResult
    public func append(_ type: String, dataJSON: String, intentJSON: String? = nil) throws -> Event {
        let text = try appendJSON(type, dataJSON: dataJSON, intentJSON: intentJSON)
        return try Event(libraryText: text)
    }

    /// `append`, returning the committed event as the library's JSON text.
    public func appendJSON(_ type: String, dataJSON: String, intentJSON: String? = nil) throws -> String {
        try eventCall(type, dataJSON, intentJSON, dsh_session_append)
    }

    /// Appends several events, all or nothing: each is checked against the
    /// state after the ones before it; on the first failure nothing is
    /// committed and the error's `index` names the item.
    @discardableResult
    public func appendBatch(_ items: [BatchItem]) throws -> [Event] {
        let text = try appendBatchJSON(try encodeJSON(items, what: "batch"))
        return try Event.list(libraryText: text)
    }

    /// `appendBatch` with the batch as JSON text
    /// (`[{"type":…,"data":…,"intent":{…}}, …]`), returning the library's text.
    public func appendBatchJSON(_ batchJSON: String) throws -> String {
        try checkText(batchJSON, "batchJSON")
        return try withHandle { session in
            try batchJSON.withCString { batch in try ffiCallText { dsh_session_append_batch(session, batch, $0) } }
        }
    }

    /// Runs the checks of `append` without committing anything; returns the
    /// event `append` would commit now (its `time` is the time of the check).
    ///
    /// - Throws: the `DshError` that `append` would throw.
    public func validate(_ type: String, data: JSONValue, intent: Intent? = nil) throws -> Event {
        let text = try validateJSON(type, dataJSON: data.jsonString(),
                                    intentJSON: try intentText(intent))
        return try Event(libraryText: text)
    }

    /// `validate` for any `Encodable` data.
    public func validate<T: Encodable>(_ type: String, data: T, intent: Intent? = nil) throws -> Event {
        let text = try validateJSON(type, dataJSON: try encodeJSON(data, what: "data"),
                                    intentJSON: try intentText(intent))
        return try Event(libraryText: text)
    }

    /// `validate` with JSON text in and out.
    public func validateJSON(_ type: String, dataJSON: String, intentJSON: String? = nil) throws -> String {
        try eventCall(type, dataJSON, intentJSON, dsh_session_validate)
    }

    /// Returns once every event appended so far is durable (a memory store
    /// returns at once).
    ///
    /// - Throws: `DshError` (`.io`) when a write failed; the events stay queued and are retried.
    public func flush() throws {
        _ = try withHandle { session in try ffiCall { dsh_session_flush(session, $0) } }
    }

    /// `flush()` without blocking the calling task's thread: it waits for
    /// the disk.
    public func flush() async throws {
        try await offload { try self.flush() }
    }

    /// `fork(at:id:)` on a thread of its own: a fork writes the child's log.
    public func fork(at boundary: Int? = nil, id: String? = nil) async throws -> Session {
        try await offload { try self.fork(at: boundary, id: id) }
    }

    // MARK: Reading

    /// The session's id, header, length, surface generation and open turn.
    public func info() throws -> SessionInfo {
        try withHandle { session in try ffiCallDecoding(SessionInfo.self) { dsh_session_info(session, $0) } }
    }

    /// The events with `from <= seq < to` (`to` nil: up to the end).
    public func events(from: Int = 0, to: Int? = nil) throws -> [Event] {
        let text = try eventsJSON(from: from, to: to)
        return try Event.list(libraryText: text)
    }

    /// `events` as the library's JSON text.
    public func eventsJSON(from: Int = 0, to: Int? = nil) throws -> String {
        let lower = UInt64(max(from, 0))
        let upper = to.map { UInt64(max($0, 0)) } ?? UInt64.max
        return try withHandle { session in try ffiCallText { dsh_session_events(session, lower, upper, $0) } }
    }

    /// The live surface: `nodes` (seqs) and `replaceGeneration`.
    public func surface() throws -> Surface {
        try withHandle { session in try ffiCallDecoding(Surface.self) { dsh_session_surface(session, $0) } }
    }

    /// The derived message history: the messages of the surface nodes, in
    /// surface order (what an agent sends to its model).
    public func derive() throws -> [Message] {
        try decodeJSON([Message].self, from: Data(try deriveJSON().utf8))
    }

    /// `derive` as the library's JSON text (every message byte for byte as stored).
    public func deriveJSON() throws -> String {
        try withHandle { session in try ffiCallText { dsh_session_derive(session, $0) } }
    }

    /// The derived messages added since `cursor`, so that a host's per-step
    /// cost does not grow with the history. Start with `.start`, then pass
    /// the previous answer's `cursor`.
    public func deriveSince(_ cursor: DeriveCursor = .start) throws -> DerivedMessages {
        try decodeJSON(DerivedMessages.self, from: Data(try deriveSinceJSON(cursor).utf8))
    }

    /// `deriveSince` as the library's JSON text.
    public func deriveSinceJSON(_ cursor: DeriveCursor = .start) throws -> String {
        try withHandle { session in
            try ffiCallText { dsh_session_derive_since(session, cursor.generation, cursor.count, $0) }
        }
    }

    /// The folded request header (canonical form), or `.null`.
    public func requestHeader() throws -> JSONValue {
        try withHandle { session in try ffiCallDecoding(JSONValue.self) { dsh_session_request_header(session, $0) } }
    }

    /// The data of the latest `request/context` event, or `.null`.
    public func requestContext() throws -> JSONValue {
        try withHandle { session in try ffiCallDecoding(JSONValue.self) { dsh_session_request_context(session, $0) } }
    }

    // MARK: Forking

    /// Forks the session into a new one of the same store.
    ///
    /// - Parameters:
    ///   - boundary: the seq of the last event the child keeps (inclusive);
    ///     nil keeps every event.
    ///   - id: the child's id; generated when nil.
    /// - Throws: `DshError`: `.rejected` (`fork.open-turn`: the boundary is
    ///   inside a turn), `.invalidArgument` (`fork.out-of-range`), `.conflict`
    ///   (`fork.child-exists`), `.closed`, `.io`.
    public func fork(at boundary: Int? = nil, id: String? = nil) throws -> Session {
        struct Options: Encodable { var id: String? }
        let options = id == nil ? nil : try encodeJSON(Options(id: id), what: "fork options")
        var child: OpaquePointer?
        let data = try withHandle { session in
            try withOptionalCString(options) { opts in
                try ffiCall { dsh_session_fork(session, Int64(boundary ?? -1), opts, &child, $0) }
            }
        }
        return try Session.adopt(child, "dsh_session_fork", store: store) {
            (try decodeJSON(SessionHeader.self, from: data), [])
        }
    }

    // MARK: Helpers

    private func intentText(_ intent: Intent?) throws -> String? {
        try intent.map { try encodeJSON($0, what: "intent") }
    }

    private typealias EventFn = (
        OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
        UnsafeMutablePointer<dsh_buf>?
    ) -> dsh_status

    /// Calls `dsh_session_append` or `dsh_session_validate`.
    private func eventCall(_ type: String, _ dataJSON: String, _ intentJSON: String?, _ fn: EventFn) throws -> String {
        try checkText(type, "type")
        try checkText(dataJSON, "dataJSON")
        if let intentJSON { try checkText(intentJSON, "intentJSON") }
        return try withHandle { session in
            try type.withCString { ctype in
                try dataJSON.withCString { cdata in
                    try withOptionalCString(intentJSON) { cintent in
                        try ffiCallText { fn(session, ctype, cdata, cintent, $0) }
                    }
                }
            }
        }
    }
}
