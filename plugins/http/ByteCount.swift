import OrchestratePluginKit
import OrchestrateJSON
import OrchestrateTokenBucket

/// A size in bytes, written as a number or with a K, M or G suffix in powers of 1024 (`512K`,
/// `10G`, as `max_rate` is); `0` and `off` mean no limit.
struct ByteCount: InputValue, Sendable {
    /// nil: no limit.
    let bytes: Int64?

    init(bytes: Int64?) { self.bytes = bytes }

    static var inputSchema: JSONValue { ["type": ["integer", "string"]] }
    static var expectation: String { "a size in bytes, or with a K, M or G suffix (512K, 10G), or off" }

    init?(inputJSON json: JSONValue) {
        if let bytes = json.intValue, bytes >= 0 {
            self.bytes = bytes == 0 ? nil : bytes
        } else if let text = json.stringValue, !text.contains("/"), let size = ByteRateText.parse(text) {
            bytes = size
        } else {
            return nil
        }
    }

    var inputJSON: JSONValue { bytes.map { .int($0) } ?? .string("off") }
}
