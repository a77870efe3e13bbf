import Foundation
import OrchestrateJSON

/// Replaces secret values with `***` in everything the engine records or shows: outputs, logs,
/// errors, events. Secrets are resolved from the environment at every attempt and never stored,
/// so the redactor is rebuilt from the same resolution.
public struct Redactor: Sendable {
    public static let mask = "***"
    /// The secrets' UTF-8 bytes, longest first. Matched as bytes, not by String's `contains`,
    /// which goes by characters: a secret followed by a combining mark (U+0301) is, to String,
    /// part of another character, and was left in the clear.
    private let secrets: [[UInt8]]

    /// `secrets`: the secret values; empty ones are ignored. Longer secrets are replaced first so
    /// a secret containing another is masked whole.
    public init(secrets: some Sequence<String>) {
        self.secrets = Set(secrets.filter { !$0.isEmpty }.map { Array($0.utf8) }).sorted { $0.count > $1.count }
    }

    public var isEmpty: Bool { secrets.isEmpty }

    public func redact(_ text: String) -> String {
        guard !secrets.isEmpty else { return text }
        var text = text
        // Searched in the string's own UTF-8 storage: a text holding no secret (most of them)
        // costs no copy.
        let masked: [UInt8]? = text.withUTF8 { original in
            var current: [UInt8]?
            for secret in secrets {
                let replaced = current.map { bytes in bytes.withUnsafeBufferPointer { Self.replacing(secret, in: $0) } }
                    ?? Self.replacing(secret, in: original)
                if let replaced { current = replaced }
            }
            return current
        }
        // A valid UTF-8 secret matched in valid UTF-8 starts and ends on scalar boundaries (UTF-8
        // is self-synchronising), so the result decodes as it was.
        return masked.map { String(decoding: $0, as: UTF8.self) } ?? text
    }

    /// `bytes` with every occurrence of `secret` replaced by the mask; nil when there is none.
    private static func replacing(_ secret: [UInt8], in bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard let first = secret.first, bytes.count >= secret.count else { return nil }
        var out: [UInt8] = []
        var copied = 0
        var at = 0
        let last = bytes.count - secret.count
        while at <= last {
            if bytes[at] == first && bytes[at ..< at + secret.count].elementsEqual(secret) {
                if out.isEmpty { out.reserveCapacity(bytes.count) }
                out += bytes[copied ..< at]
                out += mask.utf8
                at += secret.count
                copied = at
            } else {
                at += 1
            }
        }
        guard copied > 0 else { return nil }
        out += bytes[copied...]
        return out
    }

    public func redact(_ value: JSONValue) -> JSONValue {
        guard !secrets.isEmpty else { return value }
        return value.mapStrings(redact)
    }
}
