// Internal plumbing between the Swift API and the C ABI: calling a function
// with an owned output buffer, passing strings, JSON in and out, and the lock
// that keeps a handle from being closed under a running call.
import CDshSession
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Calls a C function that fills a `dsh_buf`, frees the buffer, and returns its
/// bytes on `DSH_OK` or throws the `DshError` it holds otherwise.
func ffiCall(_ body: (UnsafeMutablePointer<dsh_buf>) -> dsh_status) throws -> Data {
    var buf = dsh_buf(ptr: nil, len: 0, cap: 0)
    return try withUnsafeMutablePointer(to: &buf) { out in
        defer { dsh_buf_free(out) }
        let status = body(out)
        let bytes = out.pointee.ptr.map { Data(bytes: $0, count: out.pointee.len) } ?? Data()
        guard status == DSH_OK else {
            throw DshError(status: Status(rawValue: status), errorJSON: bytes)
        }
        return bytes
    }
}

/// `ffiCall`, returning the result text.
func ffiCallText(_ body: (UnsafeMutablePointer<dsh_buf>) -> dsh_status) throws -> String {
    String(decoding: try ffiCall(body), as: UTF8.self)
}

/// `ffiCall`, decoding the result JSON as `T`.
func ffiCallDecoding<T: Decodable>(_ type: T.Type, _ body: (UnsafeMutablePointer<dsh_buf>) -> dsh_status) throws -> T {
    try decodeJSON(T.self, from: try ffiCall(body))
}

/// Decodes library output, turning a mismatch into `binding.decode`.
func decodeJSON<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
    do {
        return try JSONDecoder().decode(T.self, from: data)
    } catch {
        throw DshError.decode(String(describing: T.self), error)
    }
}

/// Encodes a value as JSON text for the library, turning a failure into `binding.encode`.
func encodeJSON<T: Encodable>(_ value: T, what: String) throws -> String {
    do {
        let encoder = JSONEncoder()
        // Swift's encoder writes object keys in hash order, which differs from
        // run to run; sorted keys make the bytes the library stores deterministic.
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    } catch {
        throw DshError.encode(what, error)
    }
}

/// The handle a successful constructor wrote (the library promises one on `DSH_OK`).
func createdHandle(_ handle: OpaquePointer?, _ what: String) throws -> OpaquePointer {
    guard let handle else {
        throw DshError(status: .internal, rule: "binding.null-handle", message: "\(what) returned DSH_OK without a handle")
    }
    return handle
}

/// Checks that a string can cross the C boundary (NUL-terminated text).
func checkText(_ text: String, _ what: String) throws {
    if text.utf8.contains(0) { throw DshError.nul(what) }
}

/// Runs `body` with a C string for `text`, or NULL when `text` is nil.
func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) throws -> R) rethrows -> R {
    guard let text else { return try body(nil) }
    return try text.withCString { try body($0) }
}

/// A reader-writer lock around a handle pointer.
///
/// Calls take it shared (so calls on one handle from many threads run as the
/// library allows: it serializes them itself), `close()` takes it exclusively,
/// so the pointer is never released while a call is using it. Shared locking
/// is re-entrant on the same thread, which lets an observer callback read the
/// session whose call triggered it.
final class HandleLock: @unchecked Sendable {
    private let rw: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        rw = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        rw.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(rw, nil)
    }

    deinit {
        pthread_rwlock_destroy(rw)
        rw.deinitialize(count: 1)
        rw.deallocate()
    }

    func shared<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(rw)
        defer { pthread_rwlock_unlock(rw) }
        return try body()
    }

    func exclusive<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(rw)
        defer { pthread_rwlock_unlock(rw) }
        return try body()
    }
}

/// Compares the library's ABI version with the header's, once per process.
enum ABICheck {
    static let error: DshError? = {
        let loaded = dsh_abi_version()
        let header = UInt32(DSH_ABI_VERSION)
        guard loaded != header else { return nil }
        return DshError(
            status: .invalidArgument, rule: "binding.abi-mismatch",
            message: "libdsh_session has ABI \(loaded), this binding was compiled against ABI \(header)")
    }()

    static func check() throws {
        if let error { throw error }
    }
}

/// Runs a blocking library call on a dispatch thread and resumes the caller
/// when it is done, so that no thread of Swift's cooperative pool waits for
/// the disk.
func offload<T>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global(qos: .userInitiated).async {
            continuation.resume(with: Result { try body() })
        }
    }
}
