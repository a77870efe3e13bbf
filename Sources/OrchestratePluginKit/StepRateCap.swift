import OrchestrateJSON
import OrchestrateTokenBucket

/// A step's own bandwidth cap: the `max_rate` input every transfer plugin takes, in one name and
/// one unit (bytes per second, or with a K, M or G suffix as `--max-rate`: `512K`, `10M`; `0` or
/// `off`: none). One token bucket for all the bytes of the attempt, both directions, whatever
/// the number of connections or files; the run's and `serve`'s `--max-rate` apply on top
/// (`StepContext.consumeBandwidth`).
///
/// ```swift
/// struct MyInputs: StepInputs { var rate = RateCapInputs() … }   // declares max_rate
/// let cap = try StepRateCap.make(inputs.rate, step: step)          // nil: no cap
/// if cap?.consume(chunk.count, step: step) == true { throw .cancelled("…") }
/// ```
public final class StepRateCap: @unchecked Sendable {
    /// An old option in another unit that still works, with a warning in the step's log. Declare
    /// it as an `@Input(…, deprecated: true)` `Int64?` and pass its value and slot here.
    public struct DeprecatedAlias {
        public let value: Int64?
        public let name: String
        /// Bytes per second in one unit of the alias (1024 for KiB/s).
        public let bytesPerUnit: Int64

        public init(_ value: Int64?, _ slot: InputSlot<Int64?>, bytesPerUnit: Int64) {
            self.value = value
            name = slot.name
            self.bytesPerUnit = bytesPerUnit
        }
    }

    public let bytesPerSecond: Int64
    private let bucket: TokenBucket

    public init(bytesPerSecond: Int64) {
        self.bytesPerSecond = bytesPerSecond
        bucket = TokenBucket(bytesPerSecond: bytesPerSecond)
    }

    /// The cap `inputs` ask for (or `alias`, logged as deprecated); nil when neither caps anything.
    public static func make(_ inputs: RateCapInputs, deprecated alias: DeprecatedAlias? = nil,
                            step: StepContext) throws(StepError) -> StepRateCap?
    {
        var rate = inputs.maxRate?.bytesPerSecond
        if let alias, let old = alias.value {
            guard !inputs.$maxRate.given else {
                throw .invalidInput("give max_rate or its deprecated alias \(alias.name), not both", code: "invalid_input")
            }
            step.log(.warn, "input '\(alias.name)' is deprecated: use max_rate: \(ByteRateText.format(old * alias.bytesPerUnit)) "
                + "(bytes per second, or with a K, M or G suffix)")
            rate = old > 0 ? old * alias.bytesPerUnit : nil
        }
        return rate.map(StepRateCap.init(bytesPerSecond:))
    }

    /// Debits `bytes` and sleeps (cancellably) until the cap allows them; returns true when
    /// cancelled while waiting.
    public func consume(_ bytes: Int, step: StepContext) -> Bool {
        let wait = bucket.reserve(Int64(bytes))
        guard wait > 0 else { return false }
        return step.sleep(milliseconds: (wait + 999_999) / 1_000_000)
    }
}

/// The `max_rate` input, declared once for every step that takes it: hold it in the step's
/// inputs as `var rate = RateCapInputs()`.
public struct RateCapInputs: StepInputs {
    @Input(name: "max_rate", help: "this step's bandwidth cap, all its transfers together: bytes per second, "
        + "or with a K, M or G suffix (512K, 10M); 0 or off: none", minimum: 0)
    public var maxRate: ByteRate?

    public init() {}
}

/// A bandwidth in bytes per second, written as a number or as `--max-rate` takes it (`512K`,
/// `10M`, `off`).
public struct ByteRate: InputValue, Sendable {
    /// nil: no cap (`0`, `off`).
    public let bytesPerSecond: Int64?

    public static var inputSchema: JSONValue { ["type": ["integer", "string"]] }
    public static var expectation: String { "bytes per second, or with a K, M or G suffix (512K, 10M), or off" }

    public init?(inputJSON json: JSONValue) {
        if let bytes = json.intValue, bytes >= 0 {
            bytesPerSecond = bytes == 0 ? nil : bytes
        } else if let text = json.stringValue, let rate = ByteRateText.parse(text) {
            bytesPerSecond = rate
        } else {
            return nil
        }
    }

    public var inputJSON: JSONValue { bytesPerSecond.map { .int($0) } ?? .string("off") }
}
