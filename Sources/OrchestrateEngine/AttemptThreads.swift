import Foundation

/// Threads for blocking work: a run's attempts, a worker's runs. Plugins block, so attempts
/// cannot run on the Swift concurrency pool; creating a thread per attempt costs more than a
/// no-op step, so idle threads wait for the next job instead of exiting. A thread is added
/// whenever none is idle, so a job never waits for another (an abandoned attempt may hold its
/// thread forever).
///
/// One idle thread at a time looks for the next job briefly before sleeping (`BriefSpin`):
/// it takes the next attempt without being woken, so a chain of quick steps costs no futex
/// wake-up per step. Only one spins, so eight threads just freed by a fan-out do not take the
/// CPUs the scheduling loop needs.
final class AttemptThreads: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    /// Threads waiting for a job, the spinning one included.
    private var idle = 0
    /// Whether an idle thread is spinning: it takes the first queued job by itself.
    private var spinning = false
    private var stopped = false
    private let name: String
    private let stackSize: Int

    private let spins: Bool

    /// - Parameters:
    ///   - stackSize: of each thread, in bytes (reserved address space, not memory).
    ///   - spins: whether an idle thread looks for the next job briefly before sleeping.
    init(name: String, stackSize: Int = 1 << 20, spins: Bool = true) {
        self.name = name
        self.stackSize = stackSize
        self.spins = spins
    }

    func run(_ job: @escaping @Sendable () -> Void) {
        condition.withLock {
            jobs.append(job)
            if spinning && jobs.count == 1 { return }
            if idle >= jobs.count {
                condition.signal()
            } else {
                let thread = Thread { [self] in work() }
                thread.name = name
                thread.stackSize = stackSize
                thread.start()
            }
        }
    }

    /// Lets idle threads exit; busy ones exit after their current attempt.
    func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }

    private func hasWork() -> Bool {
        condition.withLock { !jobs.isEmpty || stopped }
    }

    private func work() {
        condition.lock()
        while true {
            if jobs.isEmpty && !stopped {
                idle += 1
                if spins && !spinning {
                    spinning = true
                    condition.unlock()
                    _ = BriefSpin.wait(seconds: BriefSpin.attemptThreadSeconds) { hasWork() }
                    condition.lock()
                    spinning = false
                }
                while jobs.isEmpty && !stopped { condition.wait() }
                idle -= 1
            }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
            condition.lock()
        }
    }
}
