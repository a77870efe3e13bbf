import Foundation
import OrchestrateJSON

/// Replaces secret values with `***` in everything the engine records or shows: outputs, logs,
/// errors, events. Secrets are resolved from the environment at every attempt and never stored,
/// so the redactor is rebuilt from the same resolution.
public struct Redactor: Sendable {
    public static let mask = "***"
    private let secrets: [String]

    /// `secrets`: the secret values; empty ones are ignored. Longer secrets are replaced first so
    /// a secret containing another is masked whole.
    public init(secrets: some Sequence<String>) {
        self.secrets = Set(secrets.filter { !$0.isEmpty }).sorted { $0.count > $1.count }
    }

    public var isEmpty: Bool { secrets.isEmpty }

    public func redact(_ text: String) -> String {
        guard !secrets.isEmpty else { return text }
        var result = text
        for secret in secrets where result.contains(secret) {
            result = result.replacingOccurrences(of: secret, with: Redactor.mask)
        }
        return result
    }

    public func redact(_ value: JSONValue) -> JSONValue {
        guard !secrets.isEmpty else { return value }
        return value.mapStrings(redact)
    }
}
