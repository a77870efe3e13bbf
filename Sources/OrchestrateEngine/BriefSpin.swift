import Foundation
import OrchestratePluginHost

/// Waiting a few microseconds without sleeping, for the hand-over between the scheduling loop
/// and the attempt threads.
///
/// A no-op step takes a few microseconds; putting a thread to sleep on a futex and waking it
/// costs more than that, twice per step (the loop wakes an attempt thread, which wakes the
/// loop), and on a virtual machine waking an idle CPU costs tens of microseconds more. So
/// before sleeping, a thread that expects a hand-over soon checks for it in a short loop. The
/// bound keeps the cost small when nothing comes: a long step costs one bounded spin per
/// round, then the thread sleeps as before.
enum BriefSpin {
    /// How long the loop waits for a completion before sleeping: a no-op step's call and its
    /// hand-back take well under this.
    static let loopSeconds = 50e-6
    /// How long an idle attempt thread waits for the next attempt: the loop's round between
    /// one completion and the next start (one commit) takes well under this.
    static let attemptThreadSeconds = 200e-6

    /// Once the first of a burst of quick attempts has reported, how long the loop may wait
    /// for the others' reports in all, and the longest gap between two it waits through. A
    /// no-op step reports ~5 µs after the one before it (the other core runs a burst's
    /// attempts one after another), while a commit costs ~50 µs whatever its size: a round
    /// that gathers the reports of a burst commits about twice as many items as one that
    /// commits what came in when the loop looked.
    static let gatherSeconds = 60e-6
    static let gatherGapSeconds = 15e-6

    /// Calls `arrived` until it returns true (then returns true) or `seconds` have passed.
    static func wait(seconds: Double, until arrived: () -> Bool) -> Bool {
        let deadline = MonotonicClock.nowSeconds() + seconds
        while true {
            for _ in 0 ..< 64 {
                if arrived() { return true }
            }
            if MonotonicClock.nowSeconds() >= deadline { return false }
        }
    }

    /// Waits while the count `arrived` returns keeps growing: returns once it reaches
    /// `expected`, or `gap` seconds passed without growth, or `limit` seconds passed in all.
    static func gather(expected: Int, gap: Double, limit: Double, arrived: () -> Int) {
        var count = arrived()
        let start = MonotonicClock.nowSeconds()
        var lastGrowth = start
        while count < expected {
            // Reading the clock costs more than a look: look a few times between readings.
            for _ in 0 ..< 16 where arrived() != count { break }
            let now = MonotonicClock.nowSeconds()
            let current = arrived()
            if current != count {
                count = current
                lastGrowth = now
            } else if now - lastGrowth >= gap {
                return
            }
            if now - start >= limit { return }
        }
    }
}
