import Foundation
import OrchestrateLock
import OrchestratePluginHost
import OrchestrateStore

/// Keeps a run's ownership alive while it executes: renews the run's lease and its
/// concurrency slots every `heartbeatInterval`, and picks up control verbs other processes
/// left in the store (`orchestrate cancel RUN`, `orchestrate close RUN`).
///
/// On a store shared between nodes (`fencesByLease`), a heartbeat that could not renew the
/// lease before it ran out (by this process's own monotonic clock, counted from the last
/// renewal the store confirmed) stops the run here: another node may be executing it already,
/// and two nodes must never transfer the same file at once. The store refuses its commits
/// from then on anyway; this stops its transfers too.
final class Heartbeat: @unchecked Sendable {
    private unowned let executor: RunExecutor
    private let stopped = MonotonicCondition()
    private var isStopped = false
    /// When the store last confirmed the lease (monotonic seconds); the claim, just before the
    /// heartbeat starts, counts as the first.
    private var lastRenewed = MonotonicClock.nowSeconds()
    private var thread: Thread?
    private var beatsEnded = false

    init(executor: RunExecutor) {
        self.executor = executor
    }

    /// Schedules the first beat, one interval from now. The heartbeat gets its own thread only
    /// then (`HeartbeatStarter`): most runs of a busy queue are over before.
    func start() {
        HeartbeatStarter.shared.schedule(self, at: MonotonicClock.nowSeconds() + executor.options.heartbeatInterval)
    }

    /// Starts the beats' thread, which beats at once (`HeartbeatStarter` calls it when the first
    /// beat is due); does nothing once stopped. A thread per heartbeat, not one for all, because
    /// a renewal can hang on a dead network, and one run's must not hold up another's.
    func launch() {
        stopped.withLock {
            guard !isStopped else { return }
            let thread = Thread { [self] in beat() }
            thread.name = "heartbeat \(executor.run.id)"
            self.thread = thread
            thread.start()
        }
    }

    /// Stops the beats and returns once the thread, if it was started, has made its last
    /// (idempotent).
    func stop() {
        HeartbeatStarter.shared.cancel(self)
        stopped.withLock {
            isStopped = true
            stopped.broadcast()
            while thread != nil && !beatsEnded { stopped.wait() }
        }
    }

    /// True when the lease may have run out without a renewal: the executor checks it every
    /// round too, since a renewal can itself hang on a dead network.
    var isOverdue: Bool {
        let last = stopped.withLock { lastRenewed }
        return MonotonicClock.nowSeconds() - last >= executor.options.leaseDuration - executor.options.heartbeatInterval
    }

    private func renewed(at time: Double) {
        stopped.withLock { lastRenewed = max(lastRenewed, time) }
    }

    private func beat() {
        defer {
            stopped.withLock {
                beatsEnded = true
                stopped.broadcast()
            }
        }
        let interval = executor.options.heartbeatInterval
        let selfFencing = executor.store.fencesByLease
        var waitFirst = false  // launched when the first beat is due
        while true {
            let stop = stopped.withLock {
                if !isStopped && waitFirst { _ = stopped.wait(seconds: interval) }
                return isStopped
            }
            waitFirst = true
            if stop { return }
            let lease = executor.options.leaseDuration
            let store = executor.store
            let asked = MonotonicClock.nowSeconds()
            guard let (owned, control) = try? store.renewLease(executor.run.id, owner: executor.owner, lease: lease) else {
                // A busy or unreachable store: try again next beat while the lease has slack.
                if selfFencing && isOverdue { executor.loseOwnership() }
                continue
            }
            renewed(at: asked)
            try? store.renewLeases(owner: executor.owner, lease: lease)
            if !owned {
                // Another process took the run over after our lease expired: stop acting on it
                // and write nothing (cancelling would run compensations on its run).
                executor.loseOwnership()
                return
            }
            if let control, executor.options.heartbeatAppliesControls {
                try? store.requestControl(executor.run.id, control: nil)
                executor.apply(control: control)
            }
        }
    }
}
