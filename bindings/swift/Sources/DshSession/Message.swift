import Foundation

/// A message of the derived history: what an agent sends to its model.
///
/// `{"id","role","content":[…],"source":{…}}`. It is also the `data` of a
/// `user/message` event, and the `message` of `assistant/message` and
/// `tool/result` data.
public struct Message: Codable, Hashable, Sendable {
    /// The message id.
    public var id: String
    /// `user`, `assistant` or `system` (a tool result is a `user` message).
    public var role: Role
    /// The content blocks, in order.
    public var content: [ContentBlock]
    /// Who produced the message.
    public var source: MessageSource

    public init(id: String, role: Role, content: [ContentBlock], source: MessageSource) {
        self.id = id
        self.role = role
        self.content = content
        self.source = source
    }

    /// A user message with one text block.
    public static func user(id: String, text: String) -> Message {
        Message(id: id, role: .user, content: [.text(text)], source: .user)
    }

    /// An assistant message from `provider`/`model`.
    public static func assistant(id: String, content: [ContentBlock], provider: String, model: String) -> Message {
        Message(id: id, role: .assistant, content: content, source: .model(provider: provider, model: model))
    }

    /// A tool result for the call `callId`: a user message with one `tool-result` block.
    public static func toolResult(id: String, callId: String, content: [ContentBlock], isError: Bool? = nil) -> Message {
        Message(id: id, role: .user,
                content: [.toolResult(toolCallId: callId, content: content, isError: isError)],
                source: .tool(callId: callId))
    }

    /// The concatenated text of the `text` blocks.
    public var text: String {
        content.compactMap { if case .text(let t) = $0 { return t } else { return nil } }.joined()
    }
}

/// A message role. Open: unknown roles decode and round-trip.
public struct Role: RawRepresentable, Codable, Hashable, Sendable, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public init(from decoder: Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public static let user = Role(rawValue: "user")
    public static let assistant = Role(rawValue: "assistant")
    public static let system = Role(rawValue: "system")
}

/// One block of a message's content, keyed by its `type`.
///
/// Block types this module does not model are kept whole in `.other`. Keys
/// beyond the documented ones on the modelled types are not kept; the `…JSON`
/// methods of `Session` return the exact text.
public enum ContentBlock: Codable, Hashable, Sendable {
    /// `{"type":"text","text":…}`
    case text(String)
    /// `{"type":"reasoning","text":…}`
    case reasoning(String)
    /// `{"type":"tool-call","id":…,"name":…,"arguments":…}`; `arguments` is the model's raw JSON text.
    case toolCall(id: String, name: String, arguments: String)
    /// `{"type":"tool-result","toolCallId":…,"content":[…],"isError"?:…}`
    case toolResult(toolCallId: String, content: [ContentBlock], isError: Bool?)
    /// `{"type":"image","attachment":{…}}`
    case image(attachment: JSONValue)
    /// Any other block, as it was.
    case other(JSONValue)

    private enum CodingKeys: String, CodingKey {
        case type, text, id, name, arguments, toolCallId, content, isError, attachment
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decodeIfPresent(String.self, forKey: .type) {
        case "text":
            self = .text(try container.decode(String.self, forKey: .text))
        case "reasoning":
            self = .reasoning(try container.decode(String.self, forKey: .text))
        case "tool-call":
            self = .toolCall(id: try container.decode(String.self, forKey: .id),
                             name: try container.decode(String.self, forKey: .name),
                             arguments: try container.decode(String.self, forKey: .arguments))
        case "tool-result":
            self = .toolResult(toolCallId: try container.decode(String.self, forKey: .toolCallId),
                               content: try container.decode([ContentBlock].self, forKey: .content),
                               isError: try container.decodeIfPresent(Bool.self, forKey: .isError))
        case "image":
            self = .image(attachment: try container.decode(JSONValue.self, forKey: .attachment))
        default:
            self = .other(try JSONValue(from: decoder))
        }
    }

    public func encode(to encoder: Encoder) throws {
        if case .other(let value) = self {
            try value.encode(to: encoder)
            return
        }
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .text(let text):
            try container.encode("text", forKey: .type)
            try container.encode(text, forKey: .text)
        case .reasoning(let text):
            try container.encode("reasoning", forKey: .type)
            try container.encode(text, forKey: .text)
        case .toolCall(let id, let name, let arguments):
            try container.encode("tool-call", forKey: .type)
            try container.encode(id, forKey: .id)
            try container.encode(name, forKey: .name)
            try container.encode(arguments, forKey: .arguments)
        case .toolResult(let toolCallId, let content, let isError):
            try container.encode("tool-result", forKey: .type)
            try container.encode(toolCallId, forKey: .toolCallId)
            try container.encode(content, forKey: .content)
            try container.encodeIfPresent(isError, forKey: .isError)
        case .image(let attachment):
            try container.encode("image", forKey: .type)
            try container.encode(attachment, forKey: .attachment)
        case .other:
            break
        }
    }
}

/// Who produced a message, keyed by `kind`: `user`, `model` (with `provider`
/// and `model`), `tool` (with `callId`), `plugin` (with `plugin`), or any other
/// kind. Keys not modelled here (`replayState`, `form`, …) are kept in `extra`.
public struct MessageSource: Codable, Hashable, Sendable {
    public var kind: String
    /// `kind == "model"`: the provider, e.g. `"deepseek"`.
    public var provider: String?
    /// `kind == "model"`: the model, e.g. `"deepseek-chat"`.
    public var model: String?
    /// `kind == "tool"`: the tool call this result answers.
    public var callId: String?
    /// `kind == "plugin"`: the plugin's name.
    public var plugin: String?
    /// Every other key, as it was.
    public var extra: [String: JSONValue]

    public init(kind: String, provider: String? = nil, model: String? = nil, callId: String? = nil,
                plugin: String? = nil, extra: [String: JSONValue] = [:]) {
        self.kind = kind
        self.provider = provider
        self.model = model
        self.callId = callId
        self.plugin = plugin
        self.extra = extra
    }

    /// `{"kind":"user"}`
    public static let user = MessageSource(kind: "user")
    /// `{"kind":"model","provider":…,"model":…}`
    public static func model(provider: String, model: String) -> MessageSource {
        MessageSource(kind: "model", provider: provider, model: model)
    }
    /// `{"kind":"tool","callId":…}`
    public static func tool(callId: String) -> MessageSource { MessageSource(kind: "tool", callId: callId) }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private static let known: Set<String> = ["kind", "provider", "model", "callId", "plugin"]

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        kind = try container.decode(String.self, forKey: Key("kind"))
        provider = try container.decodeIfPresent(String.self, forKey: Key("provider"))
        model = try container.decodeIfPresent(String.self, forKey: Key("model"))
        callId = try container.decodeIfPresent(String.self, forKey: Key("callId"))
        plugin = try container.decodeIfPresent(String.self, forKey: Key("plugin"))
        var extra: [String: JSONValue] = [:]
        for key in container.allKeys where !Self.known.contains(key.stringValue) {
            extra[key.stringValue] = try container.decode(JSONValue.self, forKey: key)
        }
        self.extra = extra
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(kind, forKey: Key("kind"))
        try container.encodeIfPresent(provider, forKey: Key("provider"))
        try container.encodeIfPresent(model, forKey: Key("model"))
        try container.encodeIfPresent(callId, forKey: Key("callId"))
        try container.encodeIfPresent(plugin, forKey: Key("plugin"))
        for (key, value) in extra.sorted(by: { $0.key < $1.key }) where !Self.known.contains(key) {
            try container.encode(value, forKey: Key(key))
        }
    }
}
