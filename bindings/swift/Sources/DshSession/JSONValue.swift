import Foundation

/// Any JSON value: the `data` of an event, a request header, a plugin payload.
///
/// Numbers are `Double`, as in the library (which follows JavaScript: integers
/// beyond 2^53 round to the nearest double). Objects are `JSONObject`s, which
/// keep their members in order, as the log does: values that come from the
/// library's event calls (`append`, `events`, `validate`, …) and from
/// `JSONValue(parsing:)` have the stored key order, and `jsonString()` writes
/// it back unchanged. (A `JSONValue` decoded by a `Decodable` of your own gets
/// its decoder's order: Foundation's is not the text's.) Literals work:
/// `["turn": 1, "reason": ["kind": "completed"]]` keeps the order written.
/// Swift strings cannot hold a lone UTF-16 surrogate: an escaped one reads as
/// U+FFFD.
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// Parses JSON text, keeping object members in their order.
    ///
    /// - Throws: `DshError` with rule `binding.decode` when the text is not JSON.
    public init(parsing text: String) throws {
        var parser = JSONParser(Array(text.utf8))
        do {
            self = try parser.document()
        } catch let error as JSONParser.Failure {
            throw DshError(status: .invalidJSON, rule: "binding.decode",
                           message: "not JSON: \(error.what) at byte \(error.offset)")
        }
    }

    /// Converts any `Encodable` value (for example a `Message`) into a `JSONValue`.
    ///
    /// - Throws: `DshError` with rule `binding.encode` when the value cannot be encoded.
    public init<T: Encodable>(encoding value: T) throws {
        let data: Data
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            data = try encoder.encode(value)
        } catch {
            throw DshError.encode(String(describing: T.self), error)
        }
        self = try JSONValue(parsing: String(decoding: data, as: UTF8.self))
    }

    /// Decodes this value as a `Decodable` type, e.g. `event.data.decode(Message.self)`.
    ///
    /// - Throws: `DshError` with rule `binding.decode` when the shapes do not match.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try decodeJSON(T.self, from: Data(jsonString().utf8))
    }

    /// The value as compact JSON text, object members in their order.
    public func jsonString() -> String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += JSONValue.numberText(n)
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let a):
            out += "["
            for (i, v) in a.enumerated() {
                if i > 0 { out += "," }
                v.write(to: &out)
            }
            out += "]"
        case .object(let o):
            out += "{"
            for (i, m) in o.members.enumerated() {
                if i > 0 { out += "," }
                JSONValue.writeString(m.key, to: &out)
                out += ":"
                m.value.write(to: &out)
            }
            out += "}"
        }
    }

    /// A number as JSON text: integral values without a fraction ("1", not
    /// "1.0"); non-finite values, which JSON cannot hold, as `null` (what
    /// JavaScript's `JSON.stringify` writes).
    static func numberText(_ n: Double) -> String {
        guard n.isFinite else { return "null" }
        if n == 0 {
            // -0 is written as such: the library decides about it
            // (`json.not-lossless`).
            return n.sign == .minus ? "-0" : "0"
        }
        if n.rounded() == n, abs(n) < 9_007_199_254_740_992 {
            return String(Int64(n))
        }
        return "\(n)"
    }

    static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{8}": out += "\\b"
            case "\u{c}": out += "\\f"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    // MARK: Accessors

    /// `true` for `null`.
    public var isNull: Bool { if case .null = self { return true } else { return false } }
    /// The Boolean, if this is one.
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    /// The number, if this is one.
    public var doubleValue: Double? { if case .number(let n) = self { return n } else { return nil } }
    /// The number as an `Int`, if this is an integral number in `Int`'s range.
    public var intValue: Int? {
        guard case .number(let n) = self, n.rounded() == n, let i = Int(exactly: n) else { return nil }
        return i
    }
    /// The string, if this is one.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    /// The members, in order, if this is an object.
    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }

    /// The member `key` of an object (nil for a missing key or a non-object).
    public subscript(key: String) -> JSONValue? { objectValue?[key] }

    /// The element at `index` of an array (nil when out of range or not an array).
    public subscript(index: Int) -> JSONValue? {
        guard let array = arrayValue, array.indices.contains(index) else { return nil }
        return array[index]
    }
}

/// A JSON object: its members in order (as the text has them; a repeated key
/// is kept, and lookup finds its last value, as JavaScript's `JSON.parse`
/// does). Equality is JSON's: the same keys with equal (last) values, in any
/// order; `jsonString()` is where the order shows.
public struct JSONObject: Hashable, Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public static func == (a: JSONObject, b: JSONObject) -> Bool { a.dictionary == b.dictionary }
    public func hash(into hasher: inout Hasher) { hasher.combine(dictionary) }

    /// One member.
    public struct Member: Hashable, Sendable {
        /// Its key.
        public var key: String
        /// Its value.
        public var value: JSONValue

        /// A member.
        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// The members, in order.
    public var members: [Member]

    /// An object of `members`, in this order.
    public init(_ members: [Member] = []) { self.members = members }

    /// An object of `pairs`, in this order.
    public init(_ pairs: [(String, JSONValue)]) {
        members = pairs.map { Member(key: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, JSONValue)...) { self.init(elements) }

    /// The keys, in order.
    public var keys: [String] { members.map(\.key) }

    /// How many members there are.
    public var count: Int { members.count }

    /// The value of `key` (its last one), or nil. Setting replaces the last
    /// value of `key`, or appends a member; setting nil removes every member
    /// named `key`.
    public subscript(key: String) -> JSONValue? {
        get { members.last(where: { $0.key == key })?.value }
        set {
            guard let value = newValue else {
                members.removeAll { $0.key == key }
                return
            }
            if let i = members.lastIndex(where: { $0.key == key }) {
                members[i].value = value
            } else {
                members.append(Member(key: key, value: value))
            }
        }
    }

    /// The members as a dictionary (order and repeated keys are lost).
    public var dictionary: [String: JSONValue] {
        Dictionary(members.map { ($0.key, $0.value) }, uniquingKeysWith: { _, last in last })
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: JSONValue)]> {
        members.map { (key: $0.key, value: $0.value) }.makeIterator()
    }
}

/// A strict JSON parser (RFC 8259) over UTF-8 bytes that keeps object members
/// in order.
struct JSONParser {
    struct Failure: Error {
        let what: String
        let offset: Int
    }

    private let bytes: [UInt8]
    private var at = 0
    private var depth = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func document() throws -> JSONValue {
        let v = try value()
        skipSpace()
        guard at == bytes.count else { throw fail("text after the value") }
        return v
    }

    private func fail(_ what: String) -> Failure { Failure(what: what, offset: at) }

    private mutating func skipSpace() {
        while at < bytes.count, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[at]) { at += 1 }
    }

    private mutating func literal(_ word: String, _ v: JSONValue) throws -> JSONValue {
        let w = Array(word.utf8)
        guard at + w.count <= bytes.count, Array(bytes[at..<at + w.count]) == w else { throw fail("bad literal") }
        at += w.count
        return v
    }

    private mutating func value() throws -> JSONValue {
        skipSpace()
        guard at < bytes.count else { throw fail("unexpected end") }
        switch bytes[at] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        default: return .number(try number())
        }
    }

    private mutating func nest() throws {
        depth += 1
        guard depth <= 512 else { throw fail("nested too deeply") }
    }

    private mutating func object() throws -> JSONValue {
        try nest()
        at += 1
        var members: [JSONObject.Member] = []
        skipSpace()
        if at < bytes.count, bytes[at] == UInt8(ascii: "}") {
            at += 1
            depth -= 1
            return .object(JSONObject(members))
        }
        while true {
            skipSpace()
            guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { throw fail("expected a key") }
            let key = try string()
            skipSpace()
            guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            at += 1
            members.append(JSONObject.Member(key: key, value: try value()))
            skipSpace()
            guard at < bytes.count else { throw fail("unexpected end") }
            if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
            guard bytes[at] == UInt8(ascii: "}") else { throw fail("expected ',' or '}'") }
            at += 1
            depth -= 1
            return .object(JSONObject(members))
        }
    }

    private mutating func array() throws -> JSONValue {
        try nest()
        at += 1
        var items: [JSONValue] = []
        skipSpace()
        if at < bytes.count, bytes[at] == UInt8(ascii: "]") {
            at += 1
            depth -= 1
            return .array(items)
        }
        while true {
            items.append(try value())
            skipSpace()
            guard at < bytes.count else { throw fail("unexpected end") }
            if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
            guard bytes[at] == UInt8(ascii: "]") else { throw fail("expected ',' or ']'") }
            at += 1
            depth -= 1
            return .array(items)
        }
    }

    private mutating func hex4() throws -> UInt32 {
        guard at + 4 <= bytes.count, let v = UInt32(String(decoding: bytes[at..<at + 4], as: UTF8.self), radix: 16)
        else { throw fail("bad \\u escape") }
        at += 4
        return v
    }

    /// Appends the bytes `from..<to` (plain UTF-8, no escape) to `scalars`.
    private func take(_ from: Int, _ to: Int, into scalars: inout String.UnicodeScalarView) {
        if to > from {
            scalars.append(contentsOf: String(decoding: bytes[from..<to], as: UTF8.self).unicodeScalars)
        }
    }

    private mutating func string() throws -> String {
        at += 1
        var scalars = String.UnicodeScalarView()
        var run = at
        while true {
            guard at < bytes.count else { throw fail("unterminated string") }
            let b = bytes[at]
            if b == UInt8(ascii: "\"") {
                take(run, at, into: &scalars)
                at += 1
                return String(scalars)
            }
            if b < 0x20 { throw fail("control character in a string") }
            if b != UInt8(ascii: "\\") {
                at += 1
                continue
            }
            take(run, at, into: &scalars)
            at += 1
            guard at < bytes.count else { throw fail("unterminated string") }
            let e = bytes[at]
            at += 1
            switch e {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{8}")
            case UInt8(ascii: "f"): scalars.append("\u{c}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var code = try hex4()
                if (0xD800...0xDBFF).contains(code), at + 6 <= bytes.count,
                   bytes[at] == UInt8(ascii: "\\"), bytes[at + 1] == UInt8(ascii: "u") {
                    let save = at
                    at += 2
                    let low = try hex4()
                    if (0xDC00...0xDFFF).contains(low) {
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else {
                        at = save
                    }
                }
                scalars.append(Unicode.Scalar(code) ?? "\u{FFFD}")
            default: throw fail("bad escape")
            }
            run = at
        }
    }

    /// Skips ASCII digits; how many there were.
    private mutating func digits() -> Int {
        let start = at
        while at < bytes.count, (0x30...0x39).contains(bytes[at]) { at += 1 }
        return at - start
    }

    private mutating func number() throws -> Double {
        let start = at
        if at < bytes.count, bytes[at] == UInt8(ascii: "-") { at += 1 }
        guard at < bytes.count else { throw fail("bad number") }
        if bytes[at] == UInt8(ascii: "0") {
            at += 1
        } else if digits() == 0 {
            throw fail("unexpected character")
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
            at += 1
            guard digits() > 0 else { throw fail("bad fraction") }
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
            at += 1
            if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
            guard digits() > 0 else { throw fail("bad exponent") }
        }
        guard let n = Double(String(decoding: bytes[start..<at], as: UTF8.self)) else { throw fail("bad number") }
        return n
    }
}

extension JSONValue: Codable {
    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let b = try? container.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? container.decode(Double.self) {
            self = .number(n)
        } else if let s = try? container.decode(String.self) {
            self = .string(s)
        } else if let a = try? container.decode([JSONValue].self) {
            self = .array(a)
        } else if let o = try? container.decode([String: JSONValue].self) {
            // The decoder's order (not the text's; see the type's documentation).
            self = .object(JSONObject(o.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a JSON value")
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .number(let n):
            // Integral values are written without a fraction ("1", not "1.0").
            if n.rounded() == n, abs(n) < 9_007_199_254_740_992, !(n == 0 && n.sign == .minus) {
                try container.encode(Int64(n))
            } else {
                try container.encode(n)
            }
        case .string(let s): try container.encode(s)
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o.dictionary)
        }
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements))
    }
}

extension JSONValue: CustomStringConvertible {
    /// Compact JSON text, object members in their order.
    public var description: String { jsonString() }
}
