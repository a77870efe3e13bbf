import Foundation
import OrchestrateStore

/// Keeps a run's ownership alive while it executes: renews the run's lease and its
/// concurrency slots every `heartbeatInterval`, and picks up control verbs other processes
/// left in the store (`orchestrate cancel RUN`, `orchestrate close RUN`).
final class Heartbeat: @unchecked Sendable {
    private unowned let executor: RunExecutor
    private let stopped = NSCondition()
    private var isStopped = false
    private var thread: Thread?

    init(executor: RunExecutor) {
        self.executor = executor
    }

    func start() {
        let thread = Thread { [self] in beat() }
        thread.name = "heartbeat \(executor.run.id)"
        self.thread = thread
        thread.start()
    }

    func stop() {
        stopped.withLock {
            isStopped = true
            stopped.signal()
        }
        while thread?.isFinished == false { Thread.sleep(forTimeInterval: 0.001) }
    }

    private func beat() {
        let interval = executor.options.heartbeatInterval
        while true {
            let stop = stopped.withLock {
                if !isStopped { _ = stopped.wait(until: Date().addingTimeInterval(interval)) }
                return isStopped
            }
            if stop { return }
            let until = Date().timeIntervalSince1970 + executor.options.leaseDuration
            let store = executor.store
            guard let (owned, control) = try? store.renewLease(executor.run.id, owner: executor.owner, leaseUntil: until)
            else { continue }  // a busy store: try again next beat, the lease has slack
            try? store.renewLeases(owner: executor.owner, expiresAt: until)
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
