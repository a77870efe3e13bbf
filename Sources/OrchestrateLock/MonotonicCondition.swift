#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A mutex with a condition variable whose timed waits run on the monotonic clock.
///
/// Foundation's `NSCondition.wait(until:)` waits for a wall-clock instant: when NTP or an
/// operator steps the clock back by an hour, every such wait lasts an hour longer. A heartbeat
/// that waits so stops renewing its lease (another node takes the run over while it still runs
/// here), a worker stops claiming, a schedule firer misses its times. Waits for a duration are
/// what these loops mean, and the monotonic clock is what a duration is measured on:
///
/// ```swift
/// let condition = MonotonicCondition()
/// condition.withLock {
///     while !stopped { if !condition.wait(seconds: 5) { break } }  // false: the time ran out
/// }
/// condition.withLock { stopped = true; condition.broadcast() }
/// ```
public final class MonotonicCondition: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        #if !canImport(Darwin)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        #endif
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` with the mutex held; `wait`, `signal` and `broadcast` are called inside it.
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Takes the mutex, for code that waits between `lock()` and `unlock()` rather than in a
    /// closure (`withLock`).
    public func lock() { pthread_mutex_lock(mutex) }

    public func unlock() { pthread_mutex_unlock(mutex) }

    /// Waits for a signal, with the mutex held (released while waiting). May wake spuriously:
    /// check the condition in a loop.
    public func wait() {
        pthread_cond_wait(condition, mutex)
    }

    /// Waits for a signal for at most `seconds` of monotonic time, with the mutex held; false
    /// when the time ran out. May wake spuriously (true): check the condition in a loop.
    @discardableResult
    public func wait(seconds: Double) -> Bool {
        #if canImport(Darwin)
        var relative = timespec(seconds: max(0, seconds))
        return pthread_cond_timedwait_relative_np(condition, mutex, &relative) != ETIMEDOUT
        #else
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        // Bounded to a year: a deadline of infinity or a huge one must not overflow tv_sec.
        let wait = min(max(0, seconds.isNaN ? 0 : seconds), 365 * 86_400)
        var nanoseconds = Int(now.tv_nsec) + Int((wait - wait.rounded(.down)) * 1_000_000_000)
        var deadline = timespec(tv_sec: now.tv_sec + Int(wait.rounded(.down)), tv_nsec: 0)
        if nanoseconds >= 1_000_000_000 {
            deadline.tv_sec += 1
            nanoseconds -= 1_000_000_000
        }
        deadline.tv_nsec = nanoseconds
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
        #endif
    }

    public func signal() { pthread_cond_signal(condition) }

    public func broadcast() { pthread_cond_broadcast(condition) }
}

#if canImport(Darwin)
private extension timespec {
    init(seconds: Double) {
        self.init(tv_sec: Int(seconds.rounded(.down)), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1_000_000_000))
    }
}
#endif
