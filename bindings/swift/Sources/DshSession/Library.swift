import CDshSession
import Foundation

/// What `Library.buildInfo()` reports.
public struct BuildInfo: Decodable, Hashable, Sendable {
    /// The crate version, e.g. `"0.1.0"`.
    public var version: String
    /// The ABI version.
    public var abi: Int
    /// The storage backends and encodings compiled in (`"memory"`, `"sqlite"`, `"jsonl"`, `"zstd"`, …).
    public var features: [String]
    /// The bundled SQLite version.
    public var sqlite: String?
}

/// A replacement found by `Library.foldSurface(_:)`.
public struct Replacement: Decodable, Hashable, Sendable {
    /// The seq of the replacing event.
    public var seq: Int
    public var start: Int
    public var end: Int
    /// The surface nodes it shadowed.
    public var shadowedSeqs: [Int]
}

/// The result of `Library.foldSurface(_:)`.
public struct SurfaceFold: Decodable, Hashable, Sendable {
    public var nodes: [Int]
    public var replacements: [Replacement]
}

/// The library itself: versions, and the pure functions that need no store.
public enum Library {
    /// The crate version of the loaded library, e.g. `"0.1.0"`.
    public static var version: String { String(cString: dsh_version()) }

    /// The ABI version of the loaded library.
    public static var abiVersion: UInt32 { dsh_abi_version() }

    /// The ABI version of the header this module was compiled against; the
    /// module refuses to open stores when it differs from `abiVersion`.
    public static var headerABIVersion: UInt32 { UInt32(DSH_ABI_VERSION) }

    /// Version, ABI, compiled-in features and SQLite version.
    public static func buildInfo() throws -> BuildInfo {
        try ffiCallDecoding(BuildInfo.self) { dsh_build_info($0) }
    }

    /// The pure surface fold of a complete log (events with `seq` 0, 1, …).
    public static func foldSurface(_ events: [Event]) throws -> SurfaceFold {
        try pure(events, SurfaceFold.self, dsh_fold_surface)
    }

    /// The derived messages of a complete log.
    public static func deriveMessages(_ events: [Event]) throws -> [Message] {
        try pure(events, [Message].self, dsh_derive_messages)
    }

    /// The closing events crash repair would append to a complete log
    /// (empty when it ends balanced).
    public static func repairEvents(_ events: [Event]) throws -> [Event] {
        try pure(events, [Event].self, dsh_repair_events)
    }

    /// The message one event contributes to the derived history, or nil.
    public static func deriveEventMessage(_ event: Event) throws -> Message? {
        try pure(event, Message?.self, dsh_derive_event_message)
    }

    private static func pure<In: Encodable, Out: Decodable>(
        _ input: In, _ type: Out.Type,
        _ fn: (UnsafePointer<CChar>?, UnsafeMutablePointer<dsh_buf>?) -> dsh_status
    ) throws -> Out {
        try ABICheck.check()
        let text = try encodeJSON(input, what: "events")
        return try text.withCString { ctext in try ffiCallDecoding(Out.self) { fn(ctext, $0) } }
    }
}
