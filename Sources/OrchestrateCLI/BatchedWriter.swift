import Foundation
import OrchestrateLock
import OrchestratePluginHost

/// Hands items (a run's events, lines) from the engine's threads to one writer thread, which
/// takes everything queued at once and renders it as a batch: one `write(2)` for many lines.
///
/// The engine's loop thread calls the printer after each journal commit, so the printer must
/// cost it next to nothing: it only appends to an array under a lock (and wakes the writer
/// when the writer is idle); formatting and the system call happen on the writer's thread.
///
/// Promptness: an item queued while the writer is idle is rendered at once; while items keep
/// coming, the writer takes them at most every `interval` (50 ms), so a line shows at most that
/// much after its event was journaled. `drain()` renders what is left and stops the thread:
/// the printer calls it before the run's summary and before exiting on a second Ctrl-C.
///
/// Memory: at most `capacity` items wait. When stdout stops taking lines (a pipe nobody reads,
/// Ctrl-S), the writer blocks in write(2), the queue fills, and then `append` waits for room:
/// the run pauses as it would writing the line itself, instead of queueing without bound.
final class BatchedWriter<Item: Sendable>: @unchecked Sendable {
    private let condition = MonotonicCondition()
    private var queued: [Item] = []
    /// The writer waits for items (and must be woken) rather than pausing between batches.
    private var writerIdle = false
    private var draining = false
    private var stopped = false
    /// Callers of `append` waiting for room.
    private var waitingForRoom = 0
    private let capacity: Int
    private let interval: TimeInterval
    private let render: ([Item]) -> Void

    /// `render` runs on the writer thread (or on the caller of `drain()`), one batch at a time.
    init(interval: TimeInterval = 0.05, capacity: Int = 8192, render: @escaping ([Item]) -> Void) {
        self.interval = interval
        self.capacity = capacity
        self.render = render
        let thread = Thread { [self] in run() }
        thread.name = "orchestrate-output"
        thread.start()
    }

    func append(_ item: Item) {
        condition.lock()
        while queued.count >= capacity && !draining && !stopped {
            waitingForRoom += 1
            condition.wait()
            waitingForRoom -= 1
        }
        if stopped {
            // After the drain (nothing should come then): render it here, in order.
            condition.unlock()
            render([item])
            return
        }
        queued.append(item)
        let wake = writerIdle
        writerIdle = false
        condition.unlock()
        // Broadcast: appenders waiting for room share the condition (none waits while the
        // writer is idle, but a lost wake-up would stall the run).
        if wake { condition.broadcast() }
    }

    /// Renders everything queued, then stops the writer thread; later items render at once.
    /// Waits at most `timeout` (a writer blocked on a full pipe must not keep the process).
    func drain(timeout: TimeInterval = .infinity) {
        condition.lock()
        draining = true
        condition.broadcast()
        if timeout.isFinite {
            let deadline = MonotonicClock.nowSeconds() + timeout
            while !stopped && condition.wait(seconds: deadline - MonotonicClock.nowSeconds()) {}
        } else {
            while !stopped { condition.wait() }
        }
        condition.unlock()
    }

    private func run() {
        condition.lock()
        while true {
            while queued.isEmpty && !draining {
                writerIdle = true
                condition.wait()
            }
            writerIdle = false
            let batch = queued
            queued.removeAll(keepingCapacity: true)
            if waitingForRoom > 0 { condition.broadcast() }
            let finish = draining
            condition.unlock()
            if !batch.isEmpty { render(batch) }
            condition.lock()
            if finish && queued.isEmpty { break }
            // Let a burst gather before the next batch; a drain cuts the pause short.
            if !draining { _ = condition.wait(seconds: interval) }
        }
        stopped = true
        condition.broadcast()
        condition.unlock()
    }
}
