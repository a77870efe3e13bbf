import Foundation

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

    /// Calls `arrived` until it returns true (then returns true) or `seconds` have passed.
    static func wait(seconds: Double, until arrived: () -> Bool) -> Bool {
        let deadline = Monotonic.now() + seconds
        while true {
            for _ in 0 ..< 64 {
                if arrived() { return true }
            }
            if Monotonic.now() >= deadline { return false }
        }
    }
}
