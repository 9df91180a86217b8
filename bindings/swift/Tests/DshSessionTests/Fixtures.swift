import DshSession
import Foundation
import XCTest

/// Builders for the events of an agent-like conversation (the quickstart's).
enum Fixture {
    static let model = MessageSource.model(provider: "deepseek", model: "deepseek-chat")

    /// `assistant/message` data: `{turn, step, message}`.
    static func assistant(turn: Int, step: Int, id: String, _ content: [ContentBlock]) throws -> JSONValue {
        [
            "turn": .number(Double(turn)), "step": .number(Double(step)),
            "message": try JSONValue(encoding: Message(id: id, role: .assistant, content: content, source: model)),
        ]
    }

    /// `tool/result` data: `{turn, step, message}`.
    static func toolResult(turn: Int, step: Int, id: String, callId: String, text: String) throws -> JSONValue {
        [
            "turn": .number(Double(turn)), "step": .number(Double(step)),
            "message": try JSONValue(encoding: Message.toolResult(id: id, callId: callId, content: [.text(text)])),
        ]
    }

    /// Turn 1 of the quickstart: seqs 0…13, with surface nodes 1 (user),
    /// 6 (assistant with a tool call), 8 (tool result), 11 (final answer).
    static func turnOne(_ s: Session) throws {
        try s.append("turn/start", data: ["turn": 1])                                            // 0
        try s.append("user/message", data: Message.user(id: "u1", text: "What is in README.md?"),
                     intent: .append)                                                            // 1
        try s.append("step/start", data: ["turn": 1, "step": 1])                                 // 2
        try s.append("request/header", data: [
            "header": ["config": ["provider": "deepseek", "model": "deepseek-chat"],
                       "system": "You are a helpful agent."],
            "reason": "initial",
        ])                                                                                       // 3
        try s.append("assistant/chunk", data: [
            "turn": 1, "step": 1, "chunk": ["type": "text-delta", "index": 0, "text": "Let me look."],
        ])                                                                                       // 4
        try s.append("assistant/chunk", data: [
            "turn": 1, "step": 1,
            "chunk": ["type": "tool-call-delta", "index": 1, "id": "c1", "name": "read",
                      "argumentsDelta": "{\"path\":\"README.md\"}"],
        ])                                                                                       // 5
        try s.append("assistant/message", data: try assistant(turn: 1, step: 1, id: "a1", [
            .text("Let me look."),
            .toolCall(id: "c1", name: "read", arguments: "{\"path\":\"README.md\"}"),
        ]), intent: .append(sources: [4, 5]))                                                    // 6
        try s.append("tool/call", data: [
            "turn": 1, "step": 1, "callId": "c1", "name": "read", "arguments": "{}",
        ])                                                                                       // 7
        try s.append("tool/result", data: try toolResult(turn: 1, step: 1, id: "t1", callId: "c1",
                                                         text: "# dsh-session"),
                     intent: .append(sources: [7]))                                              // 8
        try s.append("step/end", data: ["turn": 1, "step": 1])                                   // 9
        try s.append("step/start", data: ["turn": 1, "step": 2])                                 // 10
        try s.append("assistant/message", data: try assistant(turn: 1, step: 2, id: "a2", [
            .text("README.md describes a native session engine."),
        ]), intent: .append(sources: []))                                                        // 11
        try s.append("step/end", data: ["turn": 1, "step": 2])                                   // 12
        try s.append("turn/end", data: ["turn": 1, "reason": ["kind": "completed"]])             // 13
    }

    /// A fresh temporary directory, removed when the test ends.
    static func temporaryDirectory(_ test: XCTestCase) throws -> URL {
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("dsh-swift-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        test.addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        return dir
    }
}

/// Asserts that `body` throws a `DshError` with `status` and `rule`, and returns it.
@discardableResult
func assertDshError<T>(
    _ status: Status, _ rule: String, file: StaticString = #filePath, line: UInt = #line,
    _ body: () throws -> T
) -> DshError? {
    do {
        _ = try body()
        XCTFail("expected \(status.name) [\(rule)], but the call succeeded", file: file, line: line)
    } catch let error as DshError {
        XCTAssertEqual(error.status, status, "\(error)", file: file, line: line)
        XCTAssertEqual(error.rule, rule, "\(error)", file: file, line: line)
        return error
    } catch {
        XCTFail("expected a DshError, got \(error)", file: file, line: line)
    }
    return nil
}

/// Collects values from any thread.
final class Collector<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [T] = []

    func add(_ value: T) {
        lock.lock()
        values.append(value)
        lock.unlock()
    }

    func all() -> [T] {
        lock.lock()
        defer { lock.unlock() }
        return values
    }
}

/// The host event types the tests append, declared as a host declares its own
/// (a strict store refuses undeclared types).
let testEventTypes = ["plugin/note", "plugin/x", "plugin/echo", "plugin/tick", "plugin/task"]

extension StoreConfig {
    /// A memory store that declares `testEventTypes`.
    static let testMemory = StoreConfig.memory(eventTypes: testEventTypes)
}
