import DshSession
import Foundation
import XCTest

/// SQLite and JSONL stores in a temporary directory: flush, reopen with crash
/// repair, list, inspect, delete, the single-writer lock.
final class PersistenceTests: XCTestCase {
    func testRepairWithoutAHandle() throws {
        let dir = try Fixture.temporaryDirectory(self)
        let store = try Store(.sqlite(path: dir.appendingPathComponent("repair.db").path))
        let s = try store.createSession(SessionOptions(id: "r"))
        try s.append("turn/start", data: ["turn": 1])
        try s.close()
        // A dry run says what a repair would write, and writes nothing.
        let dry = try store.repair("r", dryRun: true)
        XCTAssertFalse(dry.applied)
        XCTAssertEqual(dry.repaired.map(\.type), ["turn/end"])
        XCTAssertNil(dry.cut)
        XCTAssertEqual(try store.inspect("r").repair.map(\.type), ["turn/end"])
        let report = try store.repair("r")
        XCTAssertTrue(report.applied)
        XCTAssertEqual(report.repaired.first?.seq, 1)
        XCTAssertTrue(try store.inspect("r").repair.isEmpty)
        XCTAssertEqual(try store.inspect("r").quarantined ?? [], [])
        let again = try store.openSession("r")
        assertDshError(.conflict, "load.live-prepare") { _ = try store.repair("r") }
        try again.close()
        try store.close()
    }

    func testSQLiteFlushReopenWithRepair() throws {
        let dir = try Fixture.temporaryDirectory(self)
        let path = dir.appendingPathComponent("sessions.db").path

        do {
            let store = try Store(.sqlite(path: path))
            XCTAssertEqual(store.backend, "sqlite")
            let s = try store.createSession(SessionOptions(id: "demo", cwd: "/home/demo"))
            try Fixture.turnOne(s)
            // Turn 2 is left open, as if the agent crashed mid-turn.
            try s.append("turn/start", data: ["turn": 2])                                        // 14
            try s.append("user/message", data: Message.user(id: "u2", text: "More?"), intent: .append) // 15
            try s.flush()
            XCTAssertEqual(try store.list().map(\.id), ["demo"])
            // inspect reads the stored log and the closers repair would add, without writing.
            let inspection = try store.inspect("demo")
            XCTAssertEqual(inspection.header.cwd, "/home/demo")
            XCTAssertEqual(inspection.repair.map(\.type), ["turn/end"])
            XCTAssertEqual(inspection.events.count, 17)
            XCTAssertFalse(inspection.torn)
            try s.close()
            try store.close()
        }

        // A new store on the same file: opening repairs the interrupted turn
        // durably (seq 16), then marks the loaded log with session/end-seed (17).
        let store = try Store(.sqlite(path: path))
        let s = try store.openSession("demo")
        XCTAssertEqual(s.header.cwd, "/home/demo")
        XCTAssertEqual(s.repaired.map(\.type), ["turn/end"])
        XCTAssertEqual(s.repaired.first?.seq, 16)
        XCTAssertEqual(s.repaired.first?.data["reason"]?["kind"], "interrupted")
        XCTAssertEqual(try s.info().length, 18)
        XCTAssertEqual(try s.events(from: 17).map(\.type), ["session/end-seed"])
        XCTAssertNil(try s.info().openTurn)
        XCTAssertEqual(try s.derive().map(\.id), ["u1", "a1", "t1", "a2", "u2"])
        XCTAssertEqual(try s.requestHeader()["config"]?["provider"], "deepseek")

        // A session open in this store cannot be opened twice or deleted.
        assertDshError(.conflict, "load.live-prepare") { try store.openSession("demo") }
        assertDshError(.conflict, "store.delete-live") { try store.delete("demo") }
        try s.append("turn/start", data: ["turn": 3])
        try s.flush()
        try s.close()

        // Reopened again: the first repair was durable, so only turn 3 (seq 18) needs closing.
        let again = try store.openSession("demo")
        XCTAssertEqual(again.repaired.map(\.seq), [19])
        XCTAssertEqual(try again.events(from: 16, to: 17).first?.type, "turn/end")
        try again.close()

        try store.delete("demo")
        assertDshError(.notFound, "load.not-found") { try store.openSession("demo") }
        XCTAssertEqual(try store.list().count, 0)
        try store.close()
    }

    func testSecondStoreOnOneFileConflicts() throws {
        let path = try Fixture.temporaryDirectory(self).appendingPathComponent("locked.db").path
        let first = try Store(.sqlite(path: path))
        let error = assertDshError(.conflict, "store.locked") { try Store(.sqlite(path: path)) }
        XCTAssertNotNil(error)
        try first.close()
        // Released: a new store may open it.
        try Store(.sqlite(path: path)).close()
    }

    func testJSONLStoreRoundTrip() throws {
        let dir = try Fixture.temporaryDirectory(self).appendingPathComponent("logs").path
        do {
            let store = try Store(.jsonl(directory: dir, batchWindowMs: 0))
            let s = try store.createSession(id: "j")
            try Fixture.turnOne(s)
            try s.flush()
        }  // deinit closes session and store
        let store = try Store(.jsonl(directory: dir))
        let s = try store.openSession("j")
        XCTAssertEqual(s.repaired, [])
        XCTAssertEqual(try s.derive().map(\.id), ["u1", "a1", "t1", "a2"])
    }

    func testWindowedOpenAnswersLikeAFullOpen() throws {
        let dir = try Fixture.temporaryDirectory(self).appendingPathComponent("logs").path
        let store = try Store(.jsonl(directory: dir))
        let s = try store.createSession(id: "big")
        for turn in 1...3000 {  // 9000 events: two chunks of the log evicted
            try s.append("turn/start", data: ["turn": .number(Double(turn))])
            try s.append("user/message", data: Message.user(id: "u\(turn)", text: "q"), intent: .append)
            try s.append("turn/end", data: ["turn": .number(Double(turn)), "reason": ["kind": "completed"]])
        }
        let ids = try s.derive().map(\.id)
        let early = try s.events(from: 10, to: 20)
        try s.close()
        let w = try store.openSessionWindowed("big", window: 100)
        XCTAssertEqual(try w.derive().map(\.id), ids)
        XCTAssertEqual(try w.events(from: 10, to: 20), early)
        XCTAssertEqual(try w.info().length, 9001)
        assertDshError(.notFound, "load.not-found") { try store.openSessionWindowed("missing") }
        assertDshError(.invalidArgument, "arg.window") { try store.openSessionWindowed("x", window: -1) }
    }

    func testBadConfiguration() throws {
        assertDshError(.invalidJSON, "json.parse") { try Store(configJSON: "{") }
        let error = assertDshError(.invalidArgument, "config.invalid") {
            try Store(StoreConfig(backend: .sqlite))
        }
        XCTAssertNotNil(error)
    }

    func testPostgresConfigurationJSON() throws {
        // Encoded as Store(_:) encodes its configuration.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        func json(_ config: StoreConfig) throws -> String {
            String(decoding: try encoder.encode(config), as: UTF8.self)
        }
        XCTAssertEqual(try json(.postgres(url: "postgresql://u@h:5432/db")),
                       #"{"backend":"postgres","url":"postgresql://u@h:5432/db"}"#)
        XCTAssertEqual(try json(.postgres(url: "postgresql://u@h:5432/db", schema: "dsh", batchWindowMs: 25)),
                       #"{"backend":"postgres","batchWindowMs":25,"schema":"dsh","url":"postgresql://u@h:5432/db"}"#)
        XCTAssertEqual(try json(StoreConfig(backend: .postgres, url: "postgresql://u@h/db", schema: "app_1",
                                            readOnly: true)),
                       #"{"backend":"postgres","readOnly":true,"schema":"app_1","url":"postgresql://u@h/db"}"#)

        // The library reads both keys: it checks the schema name before
        // connecting, and then tries the server (none listens on port 1).
        let bad = assertDshError(.invalidArgument, "config.invalid") {
            try Store(.postgres(url: "postgresql://u@127.0.0.1:1/db", schema: "Bad"))
        }
        XCTAssertTrue(bad?.message.contains("schema") ?? false, "\(String(describing: bad))")
        assertDshError(.io, "postgres.connect") { try Store(.postgres(url: "postgresql://u@127.0.0.1:1/db")) }
    }
}
