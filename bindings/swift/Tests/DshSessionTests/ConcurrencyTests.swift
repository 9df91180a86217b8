import DshSession
import Dispatch
import Foundation
import XCTest

/// Stores and sessions used from several threads and from concurrent tasks.
final class ConcurrencyTests: XCTestCase {
    /// Eight threads append to one session while others read it: every append
    /// gets its own seq and the log stays contiguous.
    func testOneSessionFromManyThreads() throws {
        let store = try Store(.testMemory)
        let s = try store.createSession(id: "shared")
        let threads = 8, perThread = 50
        let failures = Collector<String>()
        DispatchQueue.concurrentPerform(iterations: threads * 2) { worker in
            do {
                if worker < threads {
                    for i in 0..<perThread {
                        try s.append("plugin/tick", data: ["worker": .number(Double(worker)), "i": .number(Double(i))])
                    }
                } else {
                    for _ in 0..<perThread {
                        _ = try s.derive()
                        _ = try s.info()
                    }
                }
            } catch {
                failures.add("\(error)")
            }
        }
        XCTAssertEqual(failures.all(), [])
        let events = try s.events()
        XCTAssertEqual(events.count, threads * perThread)
        XCTAssertEqual(events.map(\.seq), Array(0..<(threads * perThread)))
        // Each worker's own appends kept their order.
        for worker in 0..<threads {
            let mine = events.filter { $0.data["worker"]?.intValue == worker }.compactMap { $0.data["i"]?.intValue }
            XCTAssertEqual(mine, Array(0..<perThread))
        }
    }

    /// Closing a session while other threads use it: calls either succeed or
    /// throw `.closed`, never crash.
    func testCloseWhileOtherThreadsCall() throws {
        let store = try Store(.testMemory)
        for round in 0..<5 {
            let s = try store.createSession(id: "closing-\(round)")
            let outcomes = Collector<String>()
            DispatchQueue.concurrentPerform(iterations: 4) { worker in
                if worker == 0 {
                    usleep(200)
                    try? s.close()
                    return
                }
                for _ in 0..<200 {
                    do {
                        try s.append("plugin/tick", data: nil)
                    } catch let error as DshError where error.status == .closed {
                        return
                    } catch {
                        outcomes.add("\(error)")
                        return
                    }
                }
            }
            XCTAssertEqual(outcomes.all(), [])
            try s.close()
            XCTAssertTrue(s.isClosed)
        }
    }

    /// Concurrent tasks on a SQLite store: each task creates and fills its own
    /// session, and all of them also append to one shared session.
    func testConcurrentTasksOnSQLiteStore() async throws {
        let path = try Fixture.temporaryDirectory(self).appendingPathComponent("tasks.db").path
        let store = try Store(.sqlite(path: path, batchWindowMs: 5, eventTypes: testEventTypes))
        let shared = try store.createSession(id: "shared")
        let tasks = 8

        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for n in 0..<tasks {
                group.addTask {
                    let s = try store.createSession(id: "task-\(n)")
                    try Fixture.turnOne(s)
                    for i in 0..<10 {
                        try shared.append("plugin/task", data: ["task": .number(Double(n)), "i": .number(Double(i))])
                        await Task.yield()
                    }
                    try await s.flush()
                    try s.close()
                    return s.id
                }
            }
            var ids: [String] = []
            for try await id in group { ids.append(id) }
            return ids
        }
        XCTAssertEqual(Set(ids), Set((0..<tasks).map { "task-\($0)" }))
        try await shared.flush()
        XCTAssertEqual(try shared.info().length, tasks * 10)
        XCTAssertEqual(try store.list().count, tasks + 1)

        // Every task's session reads back from the database.
        for n in 0..<tasks {
            let s = try await store.openSession("task-\(n)")
            XCTAssertEqual(try s.derive().map(\.id), ["u1", "a1", "t1", "a2"])
            XCTAssertEqual(s.repaired, [])
        }
        try shared.close()
        try store.close()
    }
}
