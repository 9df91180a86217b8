import Foundation

/// One event of a session log, as the library records it.
///
/// `{"type","seq","time","data","sourceEventSeqs"?,"surfaceOp"?,"ignorable"?}`:
/// `seq` is the event's index in the log, `time` Unix epoch milliseconds.
/// Only the three surface types (`user/message`, `assistant/message`,
/// `tool/result`) carry `surfaceOp` and `sourceEventSeqs`.
public struct Event: Codable, Hashable, Sendable {
    /// The event type, e.g. `"user/message"` or `"turn/start"` (an open vocabulary).
    public var type: String
    /// The position in the log (0, 1, 2, …).
    public var seq: Int
    /// Unix epoch milliseconds, assigned on append.
    public var time: Int
    /// The payload; its shape depends on `type`.
    public var data: JSONValue
    /// The events this one was derived from (surface types only).
    public var sourceEventSeqs: [Int]?
    /// How the event changes the surface (surface types only).
    public var surfaceOp: SurfaceOp?
    /// `true` when a reader that does not know `type` may skip the event (seeds and loads only).
    public var ignorable: Bool?

    public init(
        type: String, seq: Int, time: Int, data: JSONValue,
        sourceEventSeqs: [Int]? = nil, surfaceOp: SurfaceOp? = nil, ignorable: Bool? = nil
    ) {
        self.type = type
        self.seq = seq
        self.time = time
        self.data = data
        self.sourceEventSeqs = sourceEventSeqs
        self.surfaceOp = surfaceOp
        self.ignorable = ignorable
    }

    /// Decodes `data` as `T`, e.g. `event.decodeData(Message.self)` for a `user/message`.
    public func decodeData<T: Decodable>(_ type: T.Type) throws -> T { try data.decode(T.self) }
}

/// How a surface event changes the surface: appended at its end, or replacing
/// the nodes from `start` to `end` (seqs of surface nodes, inclusive).
public enum SurfaceOp: Codable, Hashable, Sendable {
    case append
    case replace(start: Int, end: Int)

    private enum CodingKeys: String, CodingKey { case op, start, end }

    public init(from decoder: Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let text = try? single.decode(String.self) {
            guard text == "append" else {
                throw DecodingError.dataCorruptedError(in: single, debugDescription: "unknown surfaceOp \(text)")
            }
            self = .append
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let op = try container.decode(String.self, forKey: .op)
        guard op == "replace" else {
            throw DecodingError.dataCorruptedError(forKey: .op, in: container, debugDescription: "unknown op \(op)")
        }
        self = .replace(start: try container.decode(Int.self, forKey: .start),
                        end: try container.decode(Int.self, forKey: .end))
    }

    public func encode(to encoder: Encoder) throws {
        switch self {
        case .append:
            var single = encoder.singleValueContainer()
            try single.encode("append")
        case .replace(let start, let end):
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode("replace", forKey: .op)
            try container.encode(start, forKey: .start)
            try container.encode(end, forKey: .end)
        }
    }
}

/// The surface intent of an append: `{"surfaceOp": …, "sourceEventSeqs": […]}`.
///
/// Surface types need one (`.append`, `.append(sources:)`,
/// `.replace(start:end:sources:)`); log-only types take none (pass `nil`).
public struct Intent: Codable, Hashable, Sendable {
    /// How the event changes the surface.
    public var surfaceOp: SurfaceOp?
    /// The events the new one was derived from.
    public var sourceEventSeqs: [Int]?
    /// `true` stores the event with the envelope's `ignorable` marker: every
    /// reader keeps it as an opaque log-only event, even one that does not
    /// know its type. Only for types outside the core vocabulary; a
    /// `.reference` store ignores it, as the reference does.
    public var ignorable: Bool?

    public init(surfaceOp: SurfaceOp? = nil, sourceEventSeqs: [Int]? = nil, ignorable: Bool? = nil) {
        self.surfaceOp = surfaceOp
        self.sourceEventSeqs = sourceEventSeqs
        self.ignorable = ignorable
    }

    /// A log-only host event that readers which do not know its type keep.
    public static let ignorable = Intent(ignorable: true)

    /// Append to the surface, citing no sources.
    public static let append = Intent(surfaceOp: .append)

    /// Append to the surface, citing `sources` (an assistant message cites its
    /// chunks, possibly `[]`; a tool result its `tool/call`).
    public static func append(sources: [Int]) -> Intent {
        Intent(surfaceOp: .append, sourceEventSeqs: sources)
    }

    /// Replace the surface nodes from seq `start` to seq `end` (a compaction);
    /// `sources` must cite at least every node the range shadows.
    public static func replace(start: Int, end: Int, sources: [Int]) -> Intent {
        Intent(surfaceOp: .replace(start: start, end: end), sourceEventSeqs: sources)
    }
}

/// One item of `Session.appendBatch`: an event type, its data and its intent.
public struct BatchItem: Encodable, Hashable, Sendable {
    public var type: String
    public var data: JSONValue
    public var intent: Intent?

    public init(_ type: String, data: JSONValue, intent: Intent? = nil) {
        self.type = type
        self.data = data
        self.intent = intent
    }

    /// An item whose data is any `Encodable` value (e.g. a `Message`).
    public init<T: Encodable>(_ type: String, encoding data: T, intent: Intent? = nil) throws {
        self.init(type, data: try JSONValue(encoding: data), intent: intent)
    }
}

/// A shape the library's output was expected to have.
struct UnexpectedShape: Error, CustomStringConvertible {
    let description: String
}

extension Event {
    /// The event the library wrote as `text`, its `data` in stored key order.
    init(libraryText text: String) throws {
        try self.init(json: try JSONValue(parsing: text))
    }

    /// The events of a JSON array the library wrote, in stored key order.
    static func list(libraryText text: String) throws -> [Event] {
        guard let items = try JSONValue(parsing: text).arrayValue else {
            throw DshError.decode("[Event]", UnexpectedShape(description: "not an array"))
        }
        return try items.map(Event.init(json:))
    }

    init(json v: JSONValue) throws {
        func bad(_ what: String) -> DshError {
            DshError.decode("Event", UnexpectedShape(description: what))
        }
        guard let o = v.objectValue else { throw bad("not an object") }
        guard let type = o["type"]?.stringValue else { throw bad("no type") }
        guard let seq = o["seq"]?.intValue, let time = o["time"]?.intValue else { throw bad("no seq or time") }
        var op: SurfaceOp?
        switch o["surfaceOp"] {
        case nil, .null?: op = nil
        case .string("append")?: op = .append
        case let value?:
            guard value["op"]?.stringValue == "replace", let start = value["start"]?.intValue,
                  let end = value["end"]?.intValue else { throw bad("unknown surfaceOp \(value)") }
            op = .replace(start: start, end: end)
        }
        let sources = try o["sourceEventSeqs"].map { value -> [Int] in
            guard let seqs = value.arrayValue?.compactMap(\.intValue), seqs.count == value.arrayValue?.count
            else { throw bad("bad sourceEventSeqs") }
            return seqs
        }
        self.init(type: type, seq: seq, time: time, data: o["data"] ?? .null, sourceEventSeqs: sources,
                  surfaceOp: op, ignorable: o["ignorable"]?.boolValue)
    }
}
