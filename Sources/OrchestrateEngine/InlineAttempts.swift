import Foundation
import OrchestrateLock
import OrchestratePluginHost
import OrchestrateStore
import Synchronization

/// Running a run's lone attempt on the loop's own thread.
///
/// When one attempt is all a run has in flight (a chain's step, a one-step run), the loop has
/// nothing to do until it returns: handing it to an attempt thread and waiting for its result
/// costs two thread hand-overs (futex wake-ups, 10–50 µs each on a virtual machine), more than
/// a quick step itself. So the loop's thread calls the plugin itself.
///
/// The loop must stay free to act while an attempt runs (a timeout, a cancel, an interrupt, a
/// lost lease, a plugin that ignores its cancellation and is abandoned), so the thread is only
/// lent: if the attempt still runs after `InlineAttemptWatch.tickSeconds` (1–2 ms), the watch
/// takes the loop back from it and continues it on another thread (`LoopThreads`), with the
/// attempt in flight as if it had been handed over from the start. The lent thread then
/// reports the attempt's result like an attempt thread and leaves the loop alone.
///
/// A slot says whether its executor's loop thread is lent, and to which attempt (a generation,
/// one per inline attempt): the watch compares the generation it saw at its last look.
final class InlineAttemptSlot: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var running = false
        /// The generation whose loop the watch took back.
        var takenBack: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The loop's thread starts an inline attempt: returns its generation. Wakes the watch if
    /// it sleeps (no attempt ran inline for a while): the only wake-up an inline attempt costs.
    func begin() -> UInt64 {
        let generation = state.withLock {
            $0.generation += 1
            $0.running = true
            return $0.generation
        }
        // Read after the slot's lock: a watch that went to sleep without seeing this attempt
        // set `asleep` before it looked at the slot (see `InlineAttemptWatch.sleepIfIdle`).
        if InlineAttemptWatch.shared.asleep.load(ordering: .sequentiallyConsistent) {
            InlineAttemptWatch.shared.wake()
        }
        return generation
    }

    /// The inline attempt `generation` returned: true when the thread still holds the loop,
    /// false when the watch took it back meanwhile.
    func end(_ generation: UInt64) -> Bool {
        state.withLock {
            $0.running = false
            return $0.takenBack != generation
        }
    }

    /// What the watch sees: the last attempt's generation, and whether it runs inline now.
    func look() -> (generation: UInt64, running: Bool) {
        state.withLock { ($0.generation, $0.running) }
    }

    /// Takes the loop back from inline attempt `generation` if it still runs: true when taken
    /// (the caller then continues the loop elsewhere).
    func takeBack(_ generation: UInt64) -> Bool {
        state.withLock {
            guard $0.running, $0.generation == generation else { return false }
            $0.running = false
            $0.takenBack = generation
            return true
        }
    }
}

/// One thread per process that takes the loop back from inline attempts that run too long
/// (see `InlineAttemptSlot`). It looks every `tickSeconds` while attempts run inline, so an
/// attempt is taken back 1–2 ticks after it started, and starting one costs a lock, no
/// wake-up. Once no attempt has started inline for `lingerSeconds` (a long step was taken
/// back, the runs ended), it sleeps until the next one starts.
final class InlineAttemptWatch: @unchecked Sendable {  // state guarded by `condition`
    static let shared = InlineAttemptWatch()

    /// How long an attempt runs on the loop's thread before the loop goes on elsewhere (at
    /// least this, at most twice this): well above a quick step's call, well below any timeout.
    static let tickSeconds = 1e-3
    /// How long the thread keeps looking after the last inline attempt began: a chain's steps
    /// and a queue worker's runs follow each other without a wake-up each.
    static let lingerSeconds = 0.05

    private struct Watched {
        let slot: InlineAttemptSlot
        let takeBack: @Sendable () -> Void
        /// The slot's generation at the last look.
        var generation: UInt64 = 0
        /// The generation running at the last look, and when it was first seen.
        var seen: (generation: UInt64, at: Double)?
    }

    private let condition = MonotonicCondition()
    private var watched: [ObjectIdentifier: Watched] = [:]
    private var started = false
    /// When a look last found an attempt running inline, or begun since the look before.
    private var lastActivity = 0.0
    /// Set while the thread sleeps, or is about to: an attempt that begins then wakes it.
    let asleep = Atomic<Bool>(false)

    /// Watches `slot` until `unwatch`; `takeBack` continues the loop elsewhere.
    func watch(_ slot: InlineAttemptSlot, takeBack: @escaping @Sendable () -> Void) {
        condition.withLock {
            watched[ObjectIdentifier(slot)] = Watched(slot: slot, takeBack: takeBack)
            if !started {
                started = true
                lastActivity = MonotonicClock.nowSeconds()
                let thread = Thread { [self] in loop() }
                thread.name = "inline attempt watch"
                thread.start()
            }
        }
    }

    func unwatch(_ slot: InlineAttemptSlot) {
        condition.withLock { _ = watched.removeValue(forKey: ObjectIdentifier(slot)) }
    }

    /// Ends the thread's sleep (an attempt began inline).
    func wake() {
        condition.withLock {
            asleep.store(false, ordering: .sequentiallyConsistent)
            condition.signal()
        }
    }

    private func loop() {
        while true {
            let due: [@Sendable () -> Void] = condition.withLock {
                sleepIfIdle()
                _ = condition.wait(seconds: Self.tickSeconds)
                return look(now: MonotonicClock.nowSeconds())
            }
            // Outside the lock: continuing a loop queues it on a thread pool.
            for takeBack in due { takeBack() }
        }
    }

    /// Sleeps (under the lock) once nothing began inline for `lingerSeconds`, until `wake`.
    /// `asleep` is set before the slots are looked at again, each under its lock, and
    /// `begin` reads it after taking that lock: either this look sees the new attempt, or
    /// `begin` sees `asleep` and wakes the thread.
    private func sleepIfIdle() {
        guard MonotonicClock.nowSeconds() - lastActivity >= Self.lingerSeconds else { return }
        asleep.store(true, ordering: .sequentiallyConsistent)
        let idle = watched.values.allSatisfy { entry in
            let (generation, running) = entry.slot.look()
            return !running && generation == entry.generation
        }
        if idle {
            while asleep.load(ordering: .sequentiallyConsistent) { condition.wait() }
        } else {
            asleep.store(false, ordering: .sequentiallyConsistent)
        }
        lastActivity = MonotonicClock.nowSeconds()
    }

    /// Notes what runs inline now; returns the loops to take back (running a tick or more).
    private func look(now: Double) -> [@Sendable () -> Void] {
        var due: [@Sendable () -> Void] = []
        for (key, entry) in watched {
            let (generation, running) = entry.slot.look()
            if running || generation != entry.generation { lastActivity = now }
            watched[key]?.generation = generation
            guard running else {
                watched[key]?.seen = nil
                continue
            }
            if let seen = entry.seen, seen.generation == generation {
                if now - seen.at >= Self.tickSeconds, entry.slot.takeBack(generation) {
                    watched[key]?.seen = nil
                    due.append(entry.takeBack)
                }
            } else {
                watched[key]?.seen = (generation, now)
            }
        }
        return due
    }
}

/// Threads a run's loop runs on when `execute()` lends it to attempts, or when the loop is
/// taken back from an inline attempt: a stack as large as a process's main thread, since the
/// loop evaluates expressions and encodes JSON of any depth.
enum LoopThreads {
    static let shared = AttemptThreads(name: "run loops", stackSize: 8 << 20, spins: false)
}

/// The final run record, handed from the thread that ended the loop to the one that waits.
final class EndedRun: @unchecked Sendable {  // state guarded by `condition`
    private let condition = NSCondition()
    private var record: RunRecord?

    func set(_ final: RunRecord) {
        condition.withLock {
            record = final
            condition.broadcast()
        }
    }

    func wait() -> RunRecord {
        condition.withLock {
            while record == nil { condition.wait() }
            return record!
        }
    }
}
