#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Enforces step timeouts: one thread of its own for every running step, sleeping until the
/// earliest deadline and then cancelling that step with `.timeout`.
///
/// Not Dispatch: on Linux, libdispatch's global queues are also where Swift concurrency runs,
/// so a busy engine (or a blocked pool) would make timeouts fire late. A dedicated thread
/// fires on time whatever the rest of the process is doing.
final class DeadlineTimer: @unchecked Sendable {
    static let shared = DeadlineTimer()

    private struct Entry {
        let id: UInt64
        let deadline: Int64 // monotonic milliseconds
        let signal: CancelSignal
    }

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var entries: [Entry] = [] // sorted by deadline
    private var nextID: UInt64 = 0
    private var started = false

    private init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        #if !canImport(Darwin)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        #endif
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// Cancels `signal` with `.timeout` after `milliseconds`, unless `remove` is called first.
    func add(_ signal: CancelSignal, milliseconds: Int64) -> UInt64 {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        nextID += 1
        // +1: the clock is read in whole milliseconds, and a timeout must never fire early.
        let entry = Entry(id: nextID, deadline: MonotonicClock.nowMilliseconds() + max(0, milliseconds) + 1, signal: signal)
        entries.insert(entry, at: entries.firstIndex { $0.deadline > entry.deadline } ?? entries.endIndex)
        if !started { startThread() }
        pthread_cond_signal(condition)
        return entry.id
    }

    func remove(_ id: UInt64) {
        pthread_mutex_lock(mutex)
        entries.removeAll { $0.id == id }
        pthread_mutex_unlock(mutex)
    }

    private func startThread() {
        started = true
        var thread = pthread_t()
        let box = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { argument in
            let timer = Unmanaged<DeadlineTimer>.fromOpaque(argument!).takeRetainedValue()
            timer.loop()
            return nil
        }, box)
        pthread_detach(thread)
    }

    private func loop() {
        pthread_mutex_lock(mutex)
        while true {
            let now = MonotonicClock.nowMilliseconds()
            var due: [CancelSignal] = []
            while let first = entries.first, first.deadline <= now {
                due.append(first.signal)
                entries.removeFirst()
            }
            if !due.isEmpty {
                pthread_mutex_unlock(mutex)
                due.forEach { $0.cancel(.timeout) }
                pthread_mutex_lock(mutex)
                continue
            }
            if let first = entries.first {
                var until = DeadlineTimer.absoluteTime(first.deadline)
                pthread_cond_timedwait(condition, mutex, &until)
            } else {
                pthread_cond_wait(condition, mutex)
            }
        }
    }

    /// A monotonic deadline as the timespec pthread_cond_timedwait expects (on macOS, which has
    /// no pthread_condattr_setclock, the realtime clock: close enough for a timeout).
    private static func absoluteTime(_ monotonicMilliseconds: Int64) -> timespec {
        var ts = timespec()
        #if canImport(Darwin)
        clock_gettime(CLOCK_REALTIME, &ts)
        let target = Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
            + (monotonicMilliseconds - MonotonicClock.nowMilliseconds())
        #else
        let target = monotonicMilliseconds
        #endif
        ts.tv_sec = time_t(target / 1000)
        ts.tv_nsec = Int((target % 1000) * 1_000_000)
        return ts
    }
}
