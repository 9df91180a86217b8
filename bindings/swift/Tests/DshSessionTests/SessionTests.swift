import DshSession
import Foundation
import XCTest

/// The session API on a memory store: append, rejection, batch, validate,
/// derive after a compaction, fork, close.
final class SessionTests: XCTestCase {
    func testLibraryVersionAndBuildInfo() throws {
        XCTAssertFalse(Library.version.isEmpty)
        XCTAssertEqual(Library.abiVersion, Library.headerABIVersion)
        let info = try Library.buildInfo()
        XCTAssertEqual(info.version, Library.version)
        XCTAssertEqual(UInt32(info.abi), Library.abiVersion)
        XCTAssertTrue(info.features.contains("memory"), "\(info.features)")
        XCTAssertTrue(info.features.contains("sqlite"), "\(info.features)")
    }

    func testAppendAndDeriveOnMemoryStore() throws {
        let store = try Store(.testMemory)
        XCTAssertEqual(store.backend, "memory")
        let s = try store.createSession(SessionOptions(id: "s1", cwd: "/home/demo"))
        XCTAssertEqual(s.id, "s1")
        XCTAssertEqual(s.header.cwd, "/home/demo")
        XCTAssertEqual(s.header.version, 0)
        XCTAssertEqual(s.repaired, [])

        let start = try s.append("turn/start", data: ["turn": 1])
        XCTAssertEqual(start.seq, 0)
        XCTAssertEqual(start.type, "turn/start")
        XCTAssertEqual(start.data["turn"]?.intValue, 1)
        XCTAssertNil(start.surfaceOp)
        XCTAssertGreaterThan(start.time, 0)

        let user = try s.append("user/message", data: Message.user(id: "u1", text: "hi"), intent: .append)
        XCTAssertEqual(user.seq, 1)
        XCTAssertEqual(user.surfaceOp, .append)
        XCTAssertNil(user.sourceEventSeqs)
        XCTAssertEqual(try user.decodeData(Message.self), Message.user(id: "u1", text: "hi"))

        let answer = try s.append("assistant/message",
                                  data: try Fixture.assistant(turn: 1, step: 1, id: "a1", [.text("hello")]),
                                  intent: .append(sources: []))
        XCTAssertEqual(answer.sourceEventSeqs, [])
        try s.append("turn/end", data: ["turn": 1, "reason": ["kind": "completed"]])

        let messages = try s.derive()
        XCTAssertEqual(messages.map(\.id), ["u1", "a1"])
        XCTAssertEqual(messages[0].role, .user)
        XCTAssertEqual(messages[0].source, .user)
        XCTAssertEqual(messages[1].role, .assistant)
        XCTAssertEqual(messages[1].source, Fixture.model)
        XCTAssertEqual(messages[1].text, "hello")

        let info = try s.info()
        XCTAssertEqual(info.id, "s1")
        XCTAssertEqual(info.length, 4)
        XCTAssertNil(info.openTurn)
        XCTAssertEqual(try s.surface(), Surface(nodes: [1, 2], replaceGeneration: 0))
        XCTAssertEqual(try s.events().map(\.seq), [0, 1, 2, 3])
        XCTAssertEqual(try s.events(from: 1, to: 3).map(\.type), ["user/message", "assistant/message"])
        XCTAssertEqual(try s.events(from: 2, to: 100).count, 2)

        // The JSON variants return the library's exact text.
        let derived = try s.deriveJSON()
        XCTAssertTrue(derived.hasPrefix("[{\"content\":[{\"text\":\"hi\",\"type\":\"text\"}],\"id\":\"u1\""), derived)
        let raw = try s.appendJSON("plugin/note", dataJSON: "{\"b\":1,\"a\":2}")
        XCTAssertTrue(raw.contains("\"data\":{\"b\":1,\"a\":2}"), raw)
    }

    func testRejectionCarriesRuleAndChangesNothing() throws {
        let store = try Store(.testMemory)
        let s = try store.createSession(id: "r")
        try Fixture.turnOne(s)
        let before = try s.info().length

        // A replace that shadows node 6 without citing it.
        let error = assertDshError(.rejected, "surface.replace-uncovered") {
            try s.append("user/message", data: Message.user(id: "x", text: "summary"),
                         intent: .replace(start: 1, end: 8, sources: [1, 8]))
        }
        XCTAssertFalse(error?.message.isEmpty ?? true)
        XCTAssertEqual(error?.description.hasPrefix("DSH_E_REJECTED [surface.replace-uncovered]"), true)

        // A surface type without an intent.
        assertDshError(.rejected, "surface.op-missing") {
            try s.append("user/message", data: Message.user(id: "y", text: "no intent"))
        }
        // Not JSON, and not lossless JSON (-0).
        assertDshError(.invalidJSON, "json.parse") { try s.append("plugin/x", dataJSON: "{") }
        assertDshError(.invalidJSON, "json.not-lossless") { try s.append("plugin/x", data: ["n": .number(-0.0)]) }
        // A string with NUL cannot cross the C boundary.
        assertDshError(.invalidArgument, "binding.nul") { try s.append("plugin\0x", data: nil) }

        XCTAssertEqual(try s.info().length, before)
        XCTAssertEqual(Status.rejected.name, "DSH_E_REJECTED")
        XCTAssertEqual(Status(rawValue: 12345).name, "DSH_E_UNKNOWN")
    }

    func testBatchIsAllOrNothing() throws {
        let s = try Store(.testMemory).createSession(id: "b")
        let failing = [
            BatchItem("turn/start", data: ["turn": 1]),
            try BatchItem("user/message", encoding: Message.user(id: "u1", text: "one"), intent: .append),
            try BatchItem("user/message", encoding: Message.user(id: "u2", text: "two"),
                          intent: .append(sources: [7])),  // cites a later seq
        ]
        let error = assertDshError(.rejected, "surface.source-not-earlier") { try s.appendBatch(failing) }
        XCTAssertEqual(error?.index, 2)
        XCTAssertEqual(try s.info().length, 0)

        let events = try s.appendBatch(Array(failing.prefix(2)) + [
            BatchItem("turn/end", data: ["turn": 1, "reason": ["kind": "completed"]]),
        ])
        XCTAssertEqual(events.map(\.seq), [0, 1, 2])
        XCTAssertEqual(events.map(\.type), ["turn/start", "user/message", "turn/end"])
        XCTAssertEqual(try s.derive().map(\.id), ["u1"])
    }

    func testValidateDoesNotCommit() throws {
        let s = try Store(.testMemory).createSession(id: "v")
        try Fixture.turnOne(s)
        let probe = try s.validate("user/message", data: Message.user(id: "u2", text: "next"), intent: .append)
        XCTAssertEqual(probe.seq, 14)
        XCTAssertEqual(probe.surfaceOp, .append)
        XCTAssertEqual(try s.info().length, 14)

        assertDshError(.rejected, "surface.replace-uncovered") {
            try s.validate("user/message", data: Message.user(id: "x", text: "summary"),
                           intent: .replace(start: 1, end: 8, sources: [1, 8]))
        }
        XCTAssertEqual(try s.info().length, 14)
    }

    func testDeriveAfterCompactionReplace() throws {
        let s = try Store(.testMemory).createSession(id: "c")
        try Fixture.turnOne(s)
        XCTAssertEqual(try s.derive().map(\.id), ["u1", "a1", "t1", "a2"])
        XCTAssertEqual(try s.surface().nodes, [1, 6, 8, 11])

        try s.append("compaction/start", data: ["turn": nil])                                   // 14
        let summary = try s.append(
            "user/message",
            data: Message(id: "sum1", role: .user, content: [.text("Summary: README.md was read.")],
                          source: MessageSource(kind: "compaction")),
            intent: .replace(start: 1, end: 8, sources: [1, 6, 8]))                            // 15
        XCTAssertEqual(summary.surfaceOp, .replace(start: 1, end: 8))
        XCTAssertEqual(summary.sourceEventSeqs, [1, 6, 8])
        try s.append("compaction/end", data: ["turn": nil])                                     // 16

        let messages = try s.derive()
        XCTAssertEqual(messages.map(\.id), ["sum1", "a2"])
        XCTAssertEqual(messages[0].source.kind, "compaction")
        XCTAssertEqual(try s.surface(), Surface(nodes: [15, 11], replaceGeneration: 1))
        XCTAssertEqual(try s.info().replaceGeneration, 1)
        // The log keeps every event.
        XCTAssertEqual(try s.events().count, 17)

        // The pure functions agree with the session.
        let log = try s.events()
        XCTAssertEqual(try Library.deriveMessages(log), messages)
        let fold = try Library.foldSurface(log)
        XCTAssertEqual(fold.nodes, [15, 11])
        XCTAssertEqual(fold.replacements.first?.shadowedSeqs, [1, 6, 8])
        XCTAssertEqual(try Library.repairEvents(log), [])
        XCTAssertEqual(try Library.deriveEventMessage(log[15])?.id, "sum1")
        XCTAssertNil(try Library.deriveEventMessage(log[0]))
    }

    func testDeriveSinceReturnsOnlyNewMessagesUntilAReplace() throws {
        let s = try Store(.testMemory).createSession(id: "inc")
        try Fixture.turnOne(s)
        let first = try s.deriveSince()
        XCTAssertEqual(first.messages.map(\.id), ["u1", "a1", "t1", "a2"])
        XCTAssertEqual(first.count, 4)

        try s.append("turn/start", data: ["turn": 2])
        try s.append("user/message", data: Message.user(id: "u2", text: "next"), intent: .append)
        let second = try s.deriveSince(first.cursor)
        XCTAssertFalse(second.reset)
        XCTAssertEqual(second.messages.map(\.id), ["u2"])
        XCTAssertEqual(second.count, 5)
        XCTAssertEqual(try s.deriveSince(second.cursor).messages, [])

        try s.append("user/message", data: Message.user(id: "sum", text: "summary"),
                     intent: .replace(start: 1, end: 8, sources: [1, 6, 8]))
        let third = try s.deriveSince(second.cursor)
        XCTAssertTrue(third.reset)
        XCTAssertEqual(third.messages.map(\.id), ["sum", "a2", "u2"])
        XCTAssertEqual(third.messages, try s.derive())
    }

    func testToolMessagesDecode() throws {
        let s = try Store(.testMemory).createSession(id: "t")
        try Fixture.turnOne(s)
        let messages = try s.derive()
        guard case .toolCall(let id, let name, let arguments) = messages[1].content[1] else {
            return XCTFail("expected a tool call, got \(messages[1].content)")
        }
        XCTAssertEqual([id, name, arguments], ["c1", "read", "{\"path\":\"README.md\"}"])
        XCTAssertEqual(messages[2].source, .tool(callId: "c1"))
        guard case .toolResult(let callId, let content, let isError) = messages[2].content[0] else {
            return XCTFail("expected a tool result, got \(messages[2].content)")
        }
        XCTAssertEqual(callId, "c1")
        XCTAssertEqual(content, [.text("# dsh-session")])
        XCTAssertNil(isError)
        XCTAssertEqual(try s.requestHeader()["config"]?["model"], "deepseek-chat")
        XCTAssertEqual(try s.requestContext(), .null)
    }

    func testFork() throws {
        let store = try Store(.testMemory)
        let s = try store.createSession(id: "src")
        try Fixture.turnOne(s)

        let child = try s.fork(id: "child")
        XCTAssertEqual(child.id, "child")
        XCTAssertEqual(child.header.parentSession, "src")
        XCTAssertEqual(child.header.seedLength, 14)
        XCTAssertEqual(try child.derive(), try s.derive())
        XCTAssertEqual(try child.events().last?.type, "session/end-seed")

        try child.append("turn/start", data: ["turn": 2])
        try child.append("user/message", data: Message.user(id: "u2", text: "And in the fork?"), intent: .append)
        XCTAssertEqual(try child.derive().map(\.id), ["u1", "a1", "t1", "a2", "u2"])
        XCTAssertEqual(try s.derive().map(\.id), ["u1", "a1", "t1", "a2"])

        // A boundary inside a turn, past the end, and a taken id.
        assertDshError(.rejected, "fork.open-turn") { try s.fork(at: 3) }
        assertDshError(.invalidArgument, "fork.out-of-range") { try s.fork(at: 99) }
        assertDshError(.conflict, "fork.child-exists") { try s.fork(id: "child") }
        let generated = try s.fork(at: 13)
        XCTAssertFalse(generated.id.isEmpty)
        XCTAssertEqual(generated.header.seedLength, 14)
    }

    func testCloseIsIdempotentAndClosedHandlesThrow() throws {
        let store = try Store(.testMemory)
        let s = try store.createSession(id: "x")
        try s.append("turn/start", data: ["turn": 1])
        try s.close()
        try s.close()
        XCTAssertTrue(s.isClosed)
        assertDshError(.closed, "handle.closed") { try s.append("turn/end", data: nil) }
        assertDshError(.closed, "handle.closed") { try s.derive() }

        // A memory session survives its session handle only while the store is open.
        let again = try store.openSession("x")
        XCTAssertEqual(again.repaired.map(\.type), ["turn/end"], "repair closes the open turn")
        XCTAssertEqual(try again.events().map(\.type), ["turn/start", "turn/end", "session/end-seed"])

        // Closing the store first leaves its sessions usable.
        try store.close()
        try store.close()
        XCTAssertTrue(store.isClosed)
        XCTAssertEqual(try again.derive(), [])
        try again.append("turn/start", data: ["turn": 2])
        assertDshError(.closed, "handle.closed") { try store.createSession(id: "y") }
        try again.close()
        try again.close()
    }

    func testDeinitReleasesHandles() throws {
        let store = try Store(.testMemory)
        let notices = Collector<StoreNotice>()
        try store.setObserver { notices.add($0) }
        weak var weakSession: Session?
        do {
            let s = try store.createSession(id: "scoped")
            weakSession = s
            try s.append("turn/start", data: ["turn": 1])
        }
        XCTAssertNil(weakSession)
        XCTAssertEqual(notices.kinds(for: "scoped"), [.created, .event, .disposed])
        // Released, so it can be opened again.
        let reopened = try store.openSession("scoped")
        XCTAssertEqual(reopened.repaired.count, 1)
        let event = notices.all().first { $0.kind == .event }?.event
        XCTAssertEqual(event?.type, "turn/start")
        try store.setObserver(nil)
    }

    /// The observer runs inside the call that triggered it: it may read the
    /// session, and an append from inside it is refused as re-entrant.
    func testObserverMayReadButNotAppend() throws {
        let store = try Store(.testMemory)
        let s = try store.createSession(id: "observed")
        let seen = Collector<String>()
        try store.setObserver { [weak s] notice in
            guard notice.kind == .event, let s, let event = notice.event else { return }
            do {
                let length = try s.info().length
                seen.add("\(event.type)@\(event.seq) length \(length)")
                try s.append("plugin/echo", data: nil)
                seen.add("appended from the observer")
            } catch let error as DshError {
                seen.add(error.rule)
            } catch {
                seen.add("\(error)")
            }
        }
        try s.append("turn/start", data: ["turn": 1])
        XCTAssertEqual(seen.all(), ["turn/start@0 length 1", "append.reentrant"])
        try store.setObserver(nil)
        try s.append("turn/end", data: ["turn": 1, "reason": ["kind": "completed"]])
        XCTAssertEqual(seen.all().count, 2)
    }

    func testCodableTypes() throws {
        let event = Event(type: "user/message", seq: 3, time: 17, data: try JSONValue(encoding: Message.user(id: "u", text: "t")),
                          sourceEventSeqs: [1], surfaceOp: .replace(start: 1, end: 2))
        let data = try JSONEncoder().encode(event)
        XCTAssertEqual(try JSONDecoder().decode(Event.self, from: data), event)
        let text = String(decoding: data, as: UTF8.self)
        XCTAssertTrue(text.contains("\"surfaceOp\":{"), text)
        XCTAssertFalse(text.contains("ignorable"), text)

        let intent = String(decoding: try JSONEncoder().encode(Intent.append), as: UTF8.self)
        XCTAssertEqual(intent, "{\"surfaceOp\":\"append\"}")

        let value = try JSONValue(parsing: "[true, 1, 0, 2.5, \"x\", null, {\"a\": [1e300]}]")
        XCTAssertEqual(value, [true, 1, 0, 2.5, "x", nil, ["a": [1e300]]])
        XCTAssertEqual(value.description, "[true,1,0,2.5,\"x\",null,{\"a\":[1e+300]}]")
        XCTAssertEqual(value[1]?.intValue, 1)
        XCTAssertEqual(value[6]?["a"]?[0]?.doubleValue, 1e300)

        let other = try JSONDecoder().decode(ContentBlock.self, from: Data("{\"type\":\"x-custom\",\"k\":1}".utf8))
        XCTAssertEqual(other, .other(["type": "x-custom", "k": 1]))
        let source = try JSONDecoder().decode(MessageSource.self,
                                              from: Data("{\"kind\":\"model\",\"provider\":\"p\",\"model\":\"m\",\"replayState\":{\"r\":1}}".utf8))
        XCTAssertEqual(source.extra, ["replayState": ["r": 1]])
        XCTAssertEqual(try JSONDecoder().decode(MessageSource.self, from: try JSONEncoder().encode(source)), source)
    }
}

extension Collector where T == StoreNotice {
    /// The kinds of the notices about `session`, in order.
    func kinds(for session: String) -> [StoreNotice.Kind] {
        all().filter { $0.sessionId == session }.map(\.kind)
    }
}

/// The example of the repository README's "Swift" section, kept compiling and true.
final class ReadmeExampleTests: XCTestCase {
    func testReadmeExample() throws {
        let store = try Store(.memory(eventTypes: ["myapp/note"]))  // or .sqlite(path:eventTypes:)
        let session = try store.createSession(id: "demo")
        try session.append("turn/start", data: ["turn": 1])
        try session.append("user/message", data: Message.user(id: "u1", text: "hi"), intent: .append)
        var rule = ""
        do {
            try session.append("user/message", data: Message.user(id: "s1", text: "summary"),
                               intent: .replace(start: 1, end: 1, sources: [0]))
        } catch let error as DshError {
            rule = error.rule                        // "surface.replace-uncovered"
        }
        XCTAssertEqual(rule, "surface.replace-uncovered")
        try session.append("myapp/note", data: ["x": 1])                    // a declared host type
        try session.append("other/app-data", data: nil, intent: .ignorable) // kept by any reader
        XCTAssertEqual(try session.derive().map(\.text), ["hi"])
        try session.close()
        try store.close()
    }
}
