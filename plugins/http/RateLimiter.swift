#if canImport(Glibc)
import Glibc
#endif
import OrchestratePluginKit

/// The step's own `max_rate`: a token bucket (a quarter second of burst, debt allowed) shared by
/// every request of the attempt, waited on in libcurl's read and write callbacks.
///
/// Why not libcurl's CURLOPT_MAX_RECV_SPEED_LARGE: it lets the first second through unlimited
/// (a few MiB arrive at full speed on loopback), so short transfers were not capped at all.
final class RateLimiter {
    let bytesPerSecond: Double
    private let burst: Double
    private var tokens: Double
    private var updatedAt: UInt64

    init(bytesPerSecond: Int) {
        self.bytesPerSecond = Double(bytesPerSecond)
        burst = Double(max(bytesPerSecond / 4, 16 << 10))
        tokens = burst
        updatedAt = Clock.nanoseconds()
    }

    /// Debits `bytes` and sleeps until the rate allows them. Wakes every 100 ms to look at the
    /// step's cancel flag; returns true when cancelled while waiting.
    func consume(_ bytes: Int, step: StepContext) -> Bool {
        let now = Clock.nanoseconds()
        tokens = min(burst, tokens + Double(now - updatedAt) / 1e9 * bytesPerSecond) - Double(bytes)
        updatedAt = now
        guard tokens < 0 else { return false }
        let deadline = now + UInt64(-tokens / bytesPerSecond * 1e9)
        while true {
            if step.isCancelled { return true }
            let current = Clock.nanoseconds()
            if current >= deadline { return false }
            let slice = min(deadline - current, 100_000_000)
            var pause = timespec(tv_sec: 0, tv_nsec: Int(slice))
            nanosleep(&pause, nil)
        }
    }
}
