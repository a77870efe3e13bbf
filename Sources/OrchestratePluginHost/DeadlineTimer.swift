#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateLock

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

    private let condition = MonotonicCondition()
    private var entries: [Entry] = [] // sorted by deadline
    private var nextID: UInt64 = 0
    private var started = false

    private init() {}

    /// Cancels `signal` with `.timeout` after `milliseconds`, unless `remove` is called first.
    func add(_ signal: CancelSignal, milliseconds: Int64) -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        nextID += 1
        // +1: the clock is read in whole milliseconds, and a timeout must never fire early.
        let entry = Entry(id: nextID, deadline: MonotonicClock.nowMilliseconds() + max(0, milliseconds) + 1, signal: signal)
        entries.insert(entry, at: entries.firstIndex { $0.deadline > entry.deadline } ?? entries.endIndex)
        if !started { startThread() }
        condition.signal()
        return entry.id
    }

    func remove(_ id: UInt64) {
        condition.withLock { entries.removeAll { $0.id == id } }
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
        condition.lock()
        while true {
            let now = MonotonicClock.nowMilliseconds()
            var due: [CancelSignal] = []
            while let first = entries.first, first.deadline <= now {
                due.append(first.signal)
                entries.removeFirst()
            }
            if !due.isEmpty {
                condition.unlock()
                due.forEach { $0.cancel(.timeout) }
                condition.lock()
                continue
            }
            if let first = entries.first {
                condition.wait(seconds: Double(first.deadline - now) / 1000)
            } else {
                condition.wait()
            }
        }
    }
}
