import OrchestrateJSON
import OrchestrateTokenBucket

/// A step's own bandwidth cap: the `max_rate` input every transfer plugin takes, in one name and
/// one unit (bytes per second, or with a K, M or G suffix as `--max-rate`: `512K`, `10M`; `0` or
/// `off`: none). One token bucket for all the bytes of the attempt, both directions, whatever
/// the number of connections or files; the run's and `serve`'s `--max-rate` apply on top
/// (`StepContext.consumeBandwidth`).
///
/// ```swift
/// let cap = try StepRateCap.read(step)          // nil: no max_rate
/// if cap?.consume(chunk.count, step: step) == true { throw .cancelled("…") }
/// ```
public final class StepRateCap: @unchecked Sendable {
    /// The JSON Schema property to splice into a step's `properties`.
    public static let schemaProperty = #"""
        "max_rate":{"type":["integer","string"],"description":"this step's bandwidth cap, all its transfers together: bytes per second, or with a K, M or G suffix (512K, 10M); 0 or off: none"}
        """#

    /// An old option in another unit that still works, with a warning in the step's log.
    public struct DeprecatedAlias: Sendable {
        public let key: String
        /// Bytes per second in one unit of the alias (1024 for KiB/s).
        public let bytesPerUnit: Int64

        public init(key: String, bytesPerUnit: Int64) {
            self.key = key
            self.bytesPerUnit = bytesPerUnit
        }

        /// The alias's JSON Schema property (an integer in its unit), to splice in beside
        /// `schemaProperty` so workflows that use it still validate.
        public func schemaProperty(unit: String) -> String {
            #""\#(key)":{"type":"integer","minimum":0,"description":"deprecated: use max_rate (bytes/s); this cap in \#(unit)"}"#
        }
    }

    public let bytesPerSecond: Int64
    private let bucket: TokenBucket

    public init(bytesPerSecond: Int64) {
        self.bytesPerSecond = bytesPerSecond
        bucket = TokenBucket(bytesPerSecond: bytesPerSecond)
    }

    /// The step's `max_rate` (or `alias`, logged as deprecated); nil when neither caps anything.
    public static func read(_ step: StepContext, deprecatedAlias alias: DeprecatedAlias? = nil) throws(StepError) -> StepRateCap? {
        var rate = try parse(step.inputs["max_rate"])
        if let alias, let old = try step.optionalInt(alias.key) {
            guard step.inputs["max_rate"]?.isNull ?? true else {
                throw .invalidInput("give max_rate or its deprecated alias \(alias.key), not both", code: "invalid_input")
            }
            step.log(.warn, "input '\(alias.key)' is deprecated: use max_rate: \(ByteRateText.format(old * alias.bytesPerUnit)) "
                + "(bytes per second, or with a K, M or G suffix)")
            rate = old > 0 ? old * alias.bytesPerUnit : nil
        }
        return rate.map(StepRateCap.init(bytesPerSecond:))
    }

    private static func parse(_ value: JSONValue?) throws(StepError) -> Int64? {
        guard let value, !value.isNull else { return nil }
        if let bytes = value.intValue, bytes >= 0 { return bytes == 0 ? nil : bytes }
        if let text = value.stringValue, let rate = ByteRateText.parse(text) { return rate }
        throw .invalidInput("input 'max_rate' must be bytes per second, or with a K, M or G suffix (512K, 10M), or off; not \(value)",
                            code: "invalid_input")
    }

    /// Debits `bytes` and sleeps (cancellably) until the cap allows them; returns true when
    /// cancelled while waiting.
    public func consume(_ bytes: Int, step: StepContext) -> Bool {
        let wait = bucket.reserve(Int64(bytes))
        guard wait > 0 else { return false }
        return step.sleep(milliseconds: (wait + 999_999) / 1_000_000)
    }
}
