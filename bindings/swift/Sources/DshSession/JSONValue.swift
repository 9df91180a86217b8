import Foundation

/// Any JSON value: the `data` of an event, a request header, a plugin payload.
///
/// Numbers are `Double`, as in the library (which follows JavaScript: integers
/// beyond 2^53 round to the nearest double). Objects are dictionaries, so key
/// order is not kept; use the `…JSON` methods of `Session` when the exact
/// bytes matter. Literals work: `["turn": 1, "reason": ["kind": "completed"]]`.
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses JSON text.
    ///
    /// - Throws: `DshError` with rule `binding.decode` when the text is not JSON.
    public init(parsing text: String) throws {
        self = try decodeJSON(JSONValue.self, from: Data(text.utf8))
    }

    /// Converts any `Encodable` value (for example a `Message`) into a `JSONValue`.
    ///
    /// - Throws: `DshError` with rule `binding.encode` when the value cannot be encoded.
    public init<T: Encodable>(encoding value: T) throws {
        let data: Data
        do {
            data = try JSONEncoder().encode(value)
        } catch {
            throw DshError.encode(String(describing: T.self), error)
        }
        self = try decodeJSON(JSONValue.self, from: data)
    }

    /// Decodes this value as a `Decodable` type, e.g. `event.data.decode(Message.self)`.
    ///
    /// - Throws: `DshError` with rule `binding.decode` when the shapes do not match.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let data: Data
        do {
            data = try JSONEncoder().encode(self)
        } catch {
            throw DshError.encode("JSONValue", error)
        }
        return try decodeJSON(T.self, from: data)
    }

    /// The value as compact JSON text (object keys sorted).
    public func jsonString() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return String(decoding: try encoder.encode(self), as: UTF8.self)
        } catch {
            throw DshError.encode("JSONValue", error)
        }
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
    /// The members, if this is an object.
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { return o } else { return nil } }

    /// The member `key` of an object (nil for a missing key or a non-object).
    public subscript(key: String) -> JSONValue? { objectValue?[key] }

    /// The element at `index` of an array (nil when out of range or not an array).
    public subscript(index: Int) -> JSONValue? {
        guard let array = arrayValue, array.indices.contains(index) else { return nil }
        return array[index]
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
            self = .object(o)
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
        case .object(let o): try container.encode(o)
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
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension JSONValue: CustomStringConvertible {
    /// Compact JSON text (object keys sorted).
    public var description: String { (try? jsonString()) ?? "<not encodable as JSON>" }
}
