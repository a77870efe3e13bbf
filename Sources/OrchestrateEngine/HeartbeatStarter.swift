import Foundation
import OrchestrateLock
import OrchestratePluginHost

/// Starts each heartbeat's thread when its first beat is due, from one thread per process.
///
/// A heartbeat's first beat comes one interval after its run starts, and most runs of a busy
/// queue are over by then: a thread made, parked and joined for each of them (with its stack
/// mapped and unmapped) was CPU spent for nothing. Heartbeats wait here instead, in a table;
/// those still running when their beat is due get their own thread (`Heartbeat.launch`).
final class HeartbeatStarter: @unchecked Sendable {  // state guarded by `condition`
    static let shared = HeartbeatStarter()

    private let condition = MonotonicCondition()
    /// Heartbeats not launched yet, with when their first beat is due (monotonic seconds).
    private var pending: [ObjectIdentifier: (heartbeat: Heartbeat, due: Double)] = [:]
    /// When the starter's thread will look next (infinity: when told); a heartbeat due sooner
    /// wakes it. All heartbeats of a process share one interval, so that is rare: each new one
    /// is due after those already waiting.
    private var nextLook = Double.infinity
    private var started = false

    /// Launches `heartbeat` at `due` (monotonic seconds) unless cancelled before.
    func schedule(_ heartbeat: Heartbeat, at due: Double) {
        condition.withLock {
            pending[ObjectIdentifier(heartbeat)] = (heartbeat, due)
            if !started {
                started = true
                let thread = Thread { [self] in loop() }
                thread.name = "heartbeat starter"
                thread.start()
            }
            if due < nextLook { condition.signal() }
        }
    }

    /// Forgets `heartbeat` if it was not launched yet.
    func cancel(_ heartbeat: Heartbeat) {
        condition.withLock { _ = pending.removeValue(forKey: ObjectIdentifier(heartbeat)) }
    }

    private func loop() {
        while true {
            // Launched outside the lock: `schedule` and `cancel` must not wait for a thread to
            // be made (and the two locks are never held at once).
            for heartbeat in takeDue() { heartbeat.launch() }
        }
    }

    /// Waits until at least one heartbeat is due and takes those that are.
    private func takeDue() -> [Heartbeat] {
        condition.withLock {
            while true {
                let now = MonotonicClock.nowSeconds()
                let due = pending.values.filter { $0.due <= now }.map(\.heartbeat)
                if !due.isEmpty {
                    for heartbeat in due { pending.removeValue(forKey: ObjectIdentifier(heartbeat)) }
                    nextLook = .infinity
                    return due
                }
                nextLook = pending.values.map(\.due).min() ?? .infinity
                if nextLook == .infinity {
                    condition.wait()
                } else {
                    _ = condition.wait(seconds: nextLook - now)
                }
            }
        }
    }
}
