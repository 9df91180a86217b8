import DshSession
import Foundation
import XCTest

final class OrderAndAsyncTests: XCTestCase {
    /// Object members keep their order: parsed, written back, appended and
    /// read back from the library, and in literals.
    func testJSONValueKeepsKeyOrder() throws {
        let text = #"{"z":1,"a":{"y":[1,{"b":2,"a":3}],"x":null},"m":"s\n\u0001"}"#
        let value = try JSONValue(parsing: text)
        XCTAssertEqual(value.jsonString(), text)
        XCTAssertEqual(value.objectValue?.keys, ["z", "a", "m"])
        XCTAssertEqual(value["a"]?["y"]?[1]?.objectValue?.keys, ["b", "a"])

        let store = try Store(.testMemory)
        let s = try store.createSession(id: "order")
        let event = try s.append("plugin/note", data: value)
        XCTAssertEqual(event.data.jsonString(), text)
        XCTAssertEqual(try s.events().last?.data.jsonString(), text)
        XCTAssertEqual(try s.eventsJSON().contains(text), true)

        let literal: JSONValue = ["b": 1, "a": ["d": true, "c": false]]
        XCTAssertEqual(literal.jsonString(), #"{"b":1,"a":{"d":true,"c":false}}"#)
        var object: JSONObject = ["k": 1, "j": 2]
        object["k"] = 3
        object["i"] = 4
        XCTAssertEqual(JSONValue.object(object).jsonString(), #"{"k":3,"j":2,"i":4}"#)
        XCTAssertThrowsError(try JSONValue(parsing: #"{"a":1,}"#))
        XCTAssertThrowsError(try JSONValue(parsing: "[01]"))
        XCTAssertEqual(try JSONValue(parsing: #""\ud83d\ude00""#).stringValue, "\u{1F600}")
        // Equality is JSON's (any order); the text keeps the order.
        let reordered = try JSONValue(parsing: #"{"m":"s\n\u0001","a":{"x":null,"y":[1,{"a":3,"b":2}]},"z":1}"#)
        XCTAssertEqual(reordered, value)
        XCTAssertNotEqual(reordered.jsonString(), value.jsonString())
    }

    /// The async variants of the calls that block: open, windowed open,
    /// flush, fork.
    func testAsyncVariants() async throws {
        let path = try Fixture.temporaryDirectory(self).appendingPathComponent("async.db").path
        let store = try await Store.open(.sqlite(path: path, eventTypes: testEventTypes))
        let s = try store.createSession(id: "a")
        try Fixture.turnOne(s)
        try await s.flush()
        let child = try await s.fork(id: "child")
        XCTAssertEqual(child.id, "child")
        try child.close()
        try s.close()
        let reopened = try await store.openSession("a")
        XCTAssertGreaterThan(try reopened.info().length, 0)
        let windowed = try await store.openSessionWindowed("child", window: 16)
        XCTAssertEqual(try windowed.events().first?.type, "turn/start")
    }
}
