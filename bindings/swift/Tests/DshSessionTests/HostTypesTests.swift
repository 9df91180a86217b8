import DshSession
import Foundation
import XCTest

final class HostTypesTests: XCTestCase {
    func testDeclaredIgnorableAndUndeclaredTypes() throws {
        let path = try Fixture.temporaryDirectory(self).appendingPathComponent("host.db").path
        let store = try Store(.sqlite(path: path, eventTypes: ["myapp/note"]))
        let s = try store.createSession(id: "h")
        let info = try s.info()
        XCTAssertEqual(info.admission, .strict)
        XCTAssertEqual(info.eventTypes, ["myapp/note"])
        assertDshError(.rejected, "admit.unknown-type") { try s.append("myapp/other", data: ["x": 1]) }
        assertDshError(.rejected, "msg.content") {
            try s.append("user/message", dataJSON: #"{"id":"u","role":"user","content":"hi","source":{"kind":"user"}}"#,
                         intentJSON: #"{"surfaceOp":"append"}"#)
        }
        try s.append("myapp/note", data: ["x": 1])
        let e = try s.append("other/app-data", data: ["y": 2], intent: .ignorable)
        XCTAssertEqual(e.ignorable, true)
        try s.close()
        try store.close()

        // A store that declares nothing refuses the declared type and
        // inspect names it; the ignorable event is not a problem.
        let bare = try Store(.sqlite(path: path))
        assertDshError(.schemaMismatch, "load.unknown-type") { try bare.openSession("h") }
        let inspected = try bare.inspect("h")
        XCTAssertEqual(inspected.problems?.map(\.seq), [0])
        XCTAssertEqual(inspected.problems?.map(\.rule), ["load.unknown-type"])
        try bare.close()

        let again = try Store(.sqlite(path: path, eventTypes: ["myapp/note"]))
        XCTAssertEqual(try again.openSession("h").info().length, 3)

        let reference = try Store(.memory(eventTypes: nil, admission: .reference))
        try reference.createSession(id: "r").append("myapp/other", data: ["x": 1])
        assertDshError(.invalidArgument, "config.event-type-reserved") {
            try Store(.memory(eventTypes: ["user/message"]))
        }
    }
}
