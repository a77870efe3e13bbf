import OrchestratePluginKit
import OrchestrateTokenBucket

/// The step's own `max_rate`: a token bucket shared by every request of the attempt, waited on
/// in libcurl's read and write callbacks (the run's and serve's `--max-rate` apply on top,
/// through the host's bandwidth extension).
///
/// Why not libcurl's CURLOPT_MAX_RECV_SPEED_LARGE: it lets the first second through unlimited
/// (a few MiB arrive at full speed on loopback), so short transfers were not capped at all.
final class RateLimiter {
    private let bucket: TokenBucket

    init(bytesPerSecond: Int) {
        bucket = TokenBucket(bytesPerSecond: Int64(bytesPerSecond))
    }

    /// Debits `bytes` and sleeps (cancellably) until the rate allows them; returns true when
    /// cancelled while waiting.
    func consume(_ bytes: Int, step: StepContext) -> Bool {
        let wait = bucket.reserve(Int64(bytes))
        guard wait > 0 else { return false }
        return step.sleep(milliseconds: (wait + 999_999) / 1_000_000)
    }
}
