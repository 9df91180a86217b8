import CDshSession
import Foundation

/// A status code of the C API (`dsh_status`): `DSH_OK` or one of the `DSH_E_*` values.
///
/// A struct rather than an enum so that codes added by a newer library still
/// round-trip; compare against the static constants.
public struct Status: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric code (`dsh_status`).
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Success.
    public static let ok = Status(rawValue: DSH_OK)
    /// The input is not JSON, or not lossless JSON (`json.*` rules).
    public static let invalidJSON = Status(rawValue: DSH_E_INVALID_JSON)
    /// Well-formed input that breaks a session rule; nothing changed.
    public static let rejected = Status(rawValue: DSH_E_REJECTED)
    /// Stored data is damaged.
    public static let corrupt = Status(rawValue: DSH_E_CORRUPT)
    /// Stored data is intact but of another format or schema version.
    public static let schemaMismatch = Status(rawValue: DSH_E_SCHEMA_MISMATCH)
    /// Operating-system or SQLite I/O failure.
    public static let io = Status(rawValue: DSH_E_IO)
    /// Unknown session id.
    public static let notFound = Status(rawValue: DSH_E_NOT_FOUND)
    /// Valid alone but clashes with current state (duplicate id, locked store, …).
    public static let conflict = Status(rawValue: DSH_E_CONFLICT)
    /// Bad argument: bad configuration, bad boundary, a string containing NUL, …
    public static let invalidArgument = Status(rawValue: DSH_E_INVALID_ARGUMENT)
    /// The handle was closed, or poisoned by an earlier internal failure.
    public static let closed = Status(rawValue: DSH_E_CLOSED)
    /// A bug: a panic caught at the library boundary.
    public static let `internal` = Status(rawValue: DSH_E_INTERNAL)

    /// The C constant's name, e.g. `"DSH_E_REJECTED"` (`"DSH_E_UNKNOWN"` for unknown codes).
    public var name: String { String(cString: dsh_status_name(rawValue)) }

    public var description: String { name }
}

/// The error every throwing call of this module throws.
///
/// It carries the library's error object
/// `{"status","code","rule","message","index"?}`: `rule` is the stable rule id
/// of the specification (`surface.replace-uncovered`, `fork.open-turn`,
/// `handle.closed`, `json.parse`, …) and is what programs should match on.
///
/// A few conditions are detected by the Swift wrapper itself; their rules start
/// with `binding.`:
/// - `binding.nul` (`.invalidArgument`): a string argument contains U+0000,
///   which the C API cannot receive;
/// - `binding.encode` (`.invalidJSON`): a value could not be encoded as JSON
///   (e.g. a non-finite number);
/// - `binding.decode` (`.invalidJSON`): a result did not have the shape of the
///   Swift type it is returned as (events with non-message data on the surface,
///   strings with lone surrogates, …); the `…JSON` variants of the methods
///   return the library's text unchanged;
/// - `binding.abi-mismatch` (`.invalidArgument`): the loaded library was built
///   for another ABI version than the header this module was compiled with.
/// A handle used after `close()` throws the library's own `.closed` /
/// `handle.closed`.
public struct DshError: Error, Hashable, Sendable, CustomStringConvertible, LocalizedError {
    /// The status code the call returned.
    public let status: Status
    /// The stable rule id (see the type's documentation).
    public let rule: String
    /// A human-readable explanation; not stable, do not match on it.
    public let message: String
    /// For batch calls and seeds: the position of the failing item.
    public let index: Int?
    /// The reference implementation's error code, when the library gives one (e.g. `"OPEN_TURN"`).
    public let referenceCode: String?

    public init(status: Status, rule: String, message: String, index: Int? = nil, referenceCode: String? = nil) {
        self.status = status
        self.rule = rule
        self.message = message
        self.index = index
        self.referenceCode = referenceCode
    }

    public var description: String {
        var text = "\(status.name) [\(rule)]: \(message)"
        if let index { text += " (index \(index))" }
        return text
    }

    public var errorDescription: String? { description }

    /// The shape of the library's error object.
    private struct Wire: Decodable {
        var rule: String
        var message: String
        var index: Int?
        var referenceCode: String?
    }

    /// Builds the error from a failed call's status and its `out` text.
    init(status: Status, errorJSON: Data) {
        if let wire = try? JSONDecoder().decode(Wire.self, from: errorJSON) {
            self.init(status: status, rule: wire.rule, message: wire.message, index: wire.index,
                      referenceCode: wire.referenceCode)
        } else {
            let text = String(decoding: errorJSON, as: UTF8.self)
            self.init(status: status, rule: "binding.unparsed-error", message: text)
        }
    }

    static func closed(_ what: String) -> DshError {
        DshError(status: .closed, rule: "handle.closed", message: "\(what) handle is closed")
    }

    static func nul(_ what: String) -> DshError {
        DshError(status: .invalidArgument, rule: "binding.nul", message: "\(what) must not contain U+0000")
    }

    static func encode(_ what: String, _ error: Error) -> DshError {
        DshError(status: .invalidJSON, rule: "binding.encode", message: "cannot encode \(what) as JSON: \(error)")
    }

    static func decode(_ what: String, _ error: Error) -> DshError {
        DshError(status: .invalidJSON, rule: "binding.decode", message: "the result does not decode as \(what): \(error)")
    }
}
