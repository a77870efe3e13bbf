import Foundation

/// Threads for blocking work: a run's attempts, a worker's runs. Plugins block, so attempts
/// cannot run on the Swift concurrency pool; creating a thread per attempt costs more than a
/// no-op step, so idle threads wait for the next job instead of exiting. A thread is added
/// whenever none is idle, so a job never waits for another (an abandoned attempt may hold its
/// thread forever).
final class AttemptThreads: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var idle = 0
    private var stopped = false
    private let name: String
    private let stackSize: Int

    /// - Parameter stackSize: of each thread, in bytes (reserved address space, not memory).
    init(name: String, stackSize: Int = 1 << 20) {
        self.name = name
        self.stackSize = stackSize
    }

    func run(_ job: @escaping @Sendable () -> Void) {
        condition.withLock {
            jobs.append(job)
            if idle > jobs.count - 1 {
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

    private func work() {
        condition.lock()
        while true {
            while jobs.isEmpty && !stopped {
                idle += 1
                condition.wait()
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
