#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateLock

// One token bucket for every bandwidth cap in orchestrate: the engine's `--max-rate` caps (through
// the host's bandwidth extension) and a plugin's own per-step cap (`max_rate`). No dependency but
// OrchestrateLock, so plugins can link it as well as the host.

/// A token bucket: `bytesPerSecond` on average, with bursts of up to `burst` bytes. The rate
/// may change while transfers run: set by hand (`follow`, e.g. `orchestrate queue rate`), or by
/// a `RateTimetable` at its boundaries.
///
/// Bytes beyond the tokens available are still granted, as debt: the bucket goes negative and
/// the answer is how long it takes the rate to pay it back. So a chunk of any size works and
/// the long-run rate holds exactly, whatever the chunk sizes. Thread-safe: one bucket is shared
/// by every transfer it caps (all the steps of a run, or of a `serve`).
///
/// A timetable is looked at when a reservation is the first in a new wall-clock minute (every
/// boundary is on a minute), so the rate changes for transfers already running at the first
/// chunk after the boundary, without a timer thread, and a wall clock set back or forward (NTP,
/// DST) is followed as it is.
///
/// ```swift
/// let cap = TokenBucket(bytesPerSecond: 10 << 20)   // 10 MiB/s
/// let wait = cap.reserve(65_536)                    // ns before these 64 KiB may go
/// ```
public final class TokenBucket: @unchecked Sendable {
    private let clock: @Sendable () -> Int64
    private let wallClock: @Sendable () -> Int64
    private let lock = Lock()
    private var timetable: RateTimetable
    /// nil: no cap right now (a timetable's `off`).
    private var rate: Int64?
    private var tokens: Double
    private var updatedAt: Int64
    /// Wall-clock second from which the timetable must be looked at again.
    private var rateValidUntil: Int64 = .min

    /// `clock` answers monotonic nanoseconds (tests pass their own).
    public convenience init(bytesPerSecond: Int64, clock: @escaping @Sendable () -> Int64 = TokenBucket.monotonicNanoseconds) {
        precondition(bytesPerSecond > 0, "a bandwidth cap must be positive")
        self.init(timetable: RateTimetable(bytesPerSecond: bytesPerSecond), clock: clock)
    }

    /// A bucket whose rate follows `timetable`. `wallClock` answers seconds since the epoch (the
    /// timetable's local times are read from it); tests pass their own to cross a boundary.
    public init(timetable: RateTimetable, clock: @escaping @Sendable () -> Int64 = TokenBucket.monotonicNanoseconds,
                wallClock: @escaping @Sendable () -> Int64 = TokenBucket.epochSeconds) {
        self.clock = clock
        self.wallClock = wallClock
        self.timetable = timetable
        rate = timetable.rate(atEpochSeconds: wallClock())
        rateValidUntil = .min
        tokens = Double(Self.burst(for: rate))
        updatedAt = clock()
    }

    /// The rate in force now (nil: no cap).
    public var bytesPerSecond: Int64? {
        locked { refreshRate(now: clock()); return rate }
    }

    /// The timetable (or constant rate) the bucket follows.
    public var schedule: RateTimetable { locked { timetable } }

    /// The burst: a quarter second of the rate (at least 16 KiB), enough to keep a pipelined
    /// transfer moving without letting a cap be overshot by more than that.
    public var burst: Int64 { locked { Self.burst(for: rate) } }

    private static func burst(for rate: Int64?) -> Int64 { max((rate ?? 0) / 4, 16 << 10) }

    /// Follows `timetable` from now on (a new constant rate, `off`, or another timetable), for
    /// the transfers already running too.
    public func follow(_ timetable: RateTimetable) {
        locked {
            self.timetable = timetable
            rateValidUntil = .min
            refreshRate(now: clock())
        }
    }

    /// Debits `bytes` at once and answers how many nanoseconds to wait before they may move
    /// (0: at once). Never blocks, so the caller can make the wait cancellable.
    public func reserve(_ bytes: Int64) -> Int64 {
        guard bytes > 0 else { return 0 }
        return locked {
            let now = clock()
            refreshRate(now: now)
            refill(now: now)
            guard let rate else { return 0 }
            tokens -= Double(bytes)
            return tokens >= 0 ? 0 : Int64((-tokens / Double(rate) * 1e9).rounded(.up))
        }
    }

    /// Credits the tokens earned since the last call at the current rate, up to the burst.
    private func refill(now: Int64) {
        let elapsed = Double(max(0, now - updatedAt)) / 1e9
        updatedAt = now
        guard let rate else {
            tokens = Double(Self.burst(for: nil))
            return
        }
        tokens = min(Double(Self.burst(for: rate)), tokens + elapsed * Double(rate))
    }

    /// At the first call in a new wall-clock minute, reads the timetable's rate; a change
    /// settles the tokens earned at the old rate first, and starts the new one with at most
    /// its own burst (a debt made at the old rate is paid at the new one).
    private func refreshRate(now: Int64) {
        let wall = wallClock()
        guard wall >= rateValidUntil || wall < rateValidUntil - 60 else { return }  // or the clock went back
        rateValidUntil = (wall / 60 + 1) * 60
        let newRate = timetable.rate(atEpochSeconds: wall)
        guard newRate != rate else { return }
        refill(now: now)
        rate = newRate
        tokens = min(tokens, Double(Self.burst(for: newRate)))
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.withLock(body)
    }

    public static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    public static func epochSeconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }
}
