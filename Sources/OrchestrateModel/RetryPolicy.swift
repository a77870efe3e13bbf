// Retry policy, Temporal-style: how many attempts, how long to wait between them.

/// How a computed retry delay is randomised. `full` waits a uniform random time between zero and
/// the computed delay, so many runs failing together do not retry in lockstep.
public enum Jitter: String, Sendable, Hashable, CaseIterable {
    case full, none
}

/// When and how often a failed step attempt is tried again.
///
/// Defaults: 3 attempts, 1s initial interval doubling up to 1m, full jitter. A workflow's
/// `defaults.retry` is merged over these field by field, and a step's `retry:` over that.
///
///     let p = RetryPolicy(maxAttempts: 5, jitter: .none)
///     p.delay(afterAttempt: 1, unitRandom: 0)   // 1s
///     p.delay(afterAttempt: 3, unitRandom: 0)   // 4s
public struct RetryPolicy: Sendable, Hashable {
    /// Counts every attempt, the first included: 1 means never retry.
    public var maxAttempts: Int
    public var initialInterval: Duration
    /// Multiplier applied to the interval after each failed attempt (>= 1).
    public var backoff: Double
    /// Cap on the computed interval (before jitter).
    public var maxInterval: Duration
    public var jitter: Jitter
    /// Error kinds ("permanent", "invalid-input", "timeout", "retryable") or plugin error codes
    /// that end the step at once instead of retrying.
    public var nonRetryable: [String]

    public static let `default` = RetryPolicy()

    public init(maxAttempts: Int = 3, initialInterval: Duration = .seconds(1), backoff: Double = 2.0,
                maxInterval: Duration = .seconds(60), jitter: Jitter = .full, nonRetryable: [String] = [])
    {
        self.maxAttempts = maxAttempts
        self.initialInterval = initialInterval
        self.backoff = backoff
        self.maxInterval = maxInterval
        self.jitter = jitter
        self.nonRetryable = nonRetryable
    }

    /// The wait before attempt `failedAttempt + 1`: `min(initial * backoff^(failedAttempt-1), max)`,
    /// then, with full jitter, scaled by `unitRandom` (a uniform random number in [0, 1) the caller
    /// supplies, so tests and replays are deterministic). A step's own retry-after hint, when it
    /// gives one, is the engine's business and wins over this.
    public func delay(afterAttempt failedAttempt: Int, unitRandom: Double) -> Duration {
        let exponent = Double(max(failedAttempt, 1) - 1)
        let cap = max(maxInterval.inSeconds, 0)
        let initial = max(initialInterval.inSeconds, 0)
        let grown = initial == 0 ? 0 : initial * pow(max(backoff, 1), exponent)  // may be +inf
        var seconds = min(grown, cap)
        if jitter == .full { seconds *= min(max(unitRandom, 0), 1) }
        return .nanoseconds(Int64((seconds * 1e9).rounded(.down)))
    }

    /// Whether an error of this kind or code must not be retried.
    public func isNonRetryable(kind: String, code: String? = nil) -> Bool {
        nonRetryable.contains(kind) || (code.map(nonRetryable.contains) ?? false)
    }

    /// Why an error of this kind and code is not retried, in words for the run's summary
    /// (`permanent error exit_2; listed in non_retryable`), or nil when it is retried (attempts
    /// permitting). Only `retryable` and `timeout` errors are retried, minus those listed in
    /// `nonRetryable` by kind or code.
    public func whyNotRetried(kind: String, code: String? = nil) -> String? {
        let error = code.map { "\(kind) error \($0)" } ?? "\(kind) error"
        if let code, nonRetryable.contains(code) { return "\(error); \(code) is listed in non_retryable" }
        if nonRetryable.contains(kind) { return "\(error); \(kind) is listed in non_retryable" }
        if kind != "retryable" && kind != "timeout" { return "\(error); only retryable and timeout errors are retried" }
        return nil
    }
}

/// `x^y` for doubles without importing Foundation into the whole module's API.
private func pow(_ x: Double, _ y: Double) -> Double {
    var result = 1.0
    var base = x
    var n = Int(min(y, 2048))  // backoff >= 1 and the result is capped, so 2048 steps is plenty
    while n > 0 {
        if n & 1 == 1 { result *= base }
        base *= base
        n >>= 1
        if result.isInfinite { break }
    }
    return result
}

/// A retry block as written, every field optional so it can be merged over another policy.
struct RetryOverrides: Sendable, Hashable {
    var maxAttempts: Int?
    var initialInterval: Duration?
    var backoff: Double?
    var maxInterval: Duration?
    var jitter: Jitter?
    var nonRetryable: [String]?

    func applied(to base: RetryPolicy) -> RetryPolicy {
        var p = base
        if let maxAttempts { p.maxAttempts = maxAttempts }
        if let initialInterval { p.initialInterval = initialInterval }
        if let backoff { p.backoff = backoff }
        if let maxInterval { p.maxInterval = maxInterval }
        if let jitter { p.jitter = jitter }
        if let nonRetryable { p.nonRetryable = nonRetryable }
        return p
    }
}
