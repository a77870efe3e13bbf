#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// One token bucket for every bandwidth cap in orchestrate: the engine's `--max-rate` caps (through
// the host's bandwidth extension) and a plugin's own per-step cap (http's `max_rate`). No
// dependencies, so plugins can link it as well as the host.

/// A token bucket: `bytesPerSecond` on average, with bursts of up to `burst` bytes.
///
/// Bytes beyond the tokens available are still granted, as debt: the bucket goes negative and
/// the answer is how long it takes the rate to pay it back. So a chunk of any size works and
/// the long-run rate holds exactly, whatever the chunk sizes. Thread-safe: one bucket is shared
/// by every transfer it caps (all the steps of a run, or of a `serve`).
///
/// ```swift
/// let cap = TokenBucket(bytesPerSecond: 10 << 20)   // 10 MiB/s
/// let wait = cap.reserve(65_536)                    // ns before these 64 KiB may go
/// ```
public final class TokenBucket: @unchecked Sendable {
    public let bytesPerSecond: Int64
    /// The burst: a quarter second of the rate (at least 16 KiB), enough to keep a pipelined
    /// transfer moving without letting a cap be overshot by more than that.
    public let burst: Int64
    private let clock: @Sendable () -> Int64
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var tokens: Double
    private var updatedAt: Int64

    /// `clock` answers monotonic nanoseconds (tests pass their own).
    public init(bytesPerSecond: Int64, clock: @escaping @Sendable () -> Int64 = TokenBucket.monotonicNanoseconds) {
        precondition(bytesPerSecond > 0, "a bandwidth cap must be positive")
        self.bytesPerSecond = bytesPerSecond
        burst = max(bytesPerSecond / 4, 16 << 10)
        self.clock = clock
        tokens = Double(burst)
        updatedAt = clock()
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Debits `bytes` at once and answers how many nanoseconds to wait before they may move
    /// (0: at once). Never blocks, so the caller can make the wait cancellable.
    public func reserve(_ bytes: Int64) -> Int64 {
        guard bytes > 0 else { return 0 }
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        let now = clock()
        let elapsed = Double(max(0, now - updatedAt)) / 1e9
        updatedAt = now
        tokens = min(Double(burst), tokens + elapsed * Double(bytesPerSecond)) - Double(bytes)
        return tokens >= 0 ? 0 : Int64((-tokens / Double(bytesPerSecond) * 1e9).rounded(.up))
    }

    public static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
