#if canImport(Glibc)
import Glibc
#endif

/// A monotonic clock, for throttling and progress.
public enum MonotonicClock {
    public static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    public static func milliseconds() -> UInt64 { nanoseconds() / 1_000_000 }
}

/// Progress reports at most every `interval` milliseconds.
public struct ProgressTicker {
    private var last: UInt64 = 0
    private let interval: UInt64

    public init(everyMilliseconds interval: UInt64 = 100) { self.interval = interval }

    /// True when a report is due now (and counts it as made).
    public mutating func due() -> Bool {
        let now = MonotonicClock.milliseconds()
        guard now - last >= interval else { return false }
        last = now
        return true
    }
}
