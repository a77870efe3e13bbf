import Foundation
import Synchronization

/// Threads for blocking work: a run's attempts, a worker's runs. Plugins block, so attempts
/// cannot run on the Swift concurrency pool; creating a thread per attempt costs more than a
/// no-op step, so idle threads wait for the next job instead of exiting. Threads are added
/// whenever the idle ones are fewer than the queued jobs, so a job never waits for another
/// (an abandoned attempt may hold its thread forever).
///
/// Waking a sleeping thread is a system call (a futex wake, tens of microseconds on a virtual
/// machine), so the thread that hands jobs over (the run's scheduling loop, the busiest thread
/// of a quick fan-out) wakes at most one: a thread that takes a job and sees more queued wakes
/// the next before running its own. With quick jobs, the first thread often takes the next
/// one itself before the one it woke arrives.
///
/// One idle thread at a time looks for the next job briefly before sleeping (`BriefSpin`),
/// without taking the lock (`queuedCount`): it takes the next attempt without being woken, so
/// a chain of quick steps costs no futex wake-up per step. Only one spins, so eight threads
/// just freed by a fan-out do not take the CPUs the scheduling loop needs.
package final class AttemptThreads: @unchecked Sendable {
    package typealias Job = @Sendable () -> Void

    private let condition = NSCondition()
    private var jobs = StartQueue<Job>()
    /// `jobs.count`, written under the lock, read by the spinning thread without it.
    private let queuedCount = Atomic<Int>(0)
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
    package init(name: String, stackSize: Int = 1 << 20, spins: Bool = true) {
        self.name = name
        self.stackSize = stackSize
        self.spins = spins
    }

    package func run(_ job: @escaping Job) { run(contentsOf: [job]) }

    /// Queues `batch`, in order, taking the lock once: a round's attempts start together.
    package func run(contentsOf batch: [Job]) {
        guard !batch.isEmpty else { return }
        condition.withLock {
            for job in batch { jobs.append(job) }
            queuedCount.store(jobs.count, ordering: .releasing)
            for _ in 0 ..< max(jobs.count - idle, 0) {
                idle += 1  // counted idle from now: the new thread takes a job before it waits
                let thread = Thread { [self] in
                    Self.nameInTheSystem(name)
                    work(startingIdle: true)
                }
                thread.name = name
                thread.stackSize = stackSize
                thread.start()
            }
            // The spinner takes the first job and wakes the next sleeper itself if need be.
            if !spinning { condition.signal() }
        }
    }

    /// Gives the calling thread `name` where the system shows it (`top -H`, `perf`,
    /// `pthread_getname_np`; at most 15 bytes there). Foundation's `Thread.name` reaches the
    /// system only when the thread that started it has already recorded the new thread, which
    /// a thread quick off the mark (a loaded machine) runs ahead of: it kept its creator's name.
    static func nameInTheSystem(_ name: String) {
        var cut = Substring(name)
        while cut.utf8.count > 15 { cut = cut.dropLast() }
        // What pthread_setname_np does (glibc declares it only for C with _GNU_SOURCE).
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        _ = Array(cut.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// Lets idle threads exit; busy ones exit after their current attempt.
    package func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }

    private func hasWork() -> Bool {
        queuedCount.load(ordering: .acquiring) > 0
    }

    private func work(startingIdle: Bool) {
        condition.lock()
        var isIdle = startingIdle
        while true {
            if jobs.isEmpty && !stopped {
                if !isIdle { idle += 1 }
                if spins && !spinning {
                    spinning = true
                    condition.unlock()
                    _ = BriefSpin.wait(seconds: BriefSpin.attemptThreadSeconds) { hasWork() }
                    condition.lock()
                    spinning = false
                }
                while jobs.isEmpty && !stopped { condition.wait() }
                isIdle = true
            }
            if isIdle {
                idle -= 1
                isIdle = false
            }
            guard let job = jobs.first else {
                condition.unlock()
                return
            }
            jobs.removeFirst()
            queuedCount.store(jobs.count, ordering: .releasing)
            // More jobs than this thread: hand the next one to a sleeper (the spinner, if
            // any, takes it by itself).
            if !jobs.isEmpty && !spinning { condition.signal() }
            condition.unlock()
            job()
            condition.lock()
        }
    }
}
