import Foundation
@testable import OrchestrateEngine
import Synchronization
import Testing

/// `InlineAttemptSlot` and `InlineAttemptWatch`: the loop's thread is lent to a lone attempt,
/// and taken back from one that runs longer than a tick, exactly once.
@Suite struct InlineAttemptsTests {
    @Test func aQuickAttemptKeepsTheLoopAndOnlyTheRunningGenerationCanBeTakenBack() {
        let slot = InlineAttemptSlot()
        let first = slot.begin()
        #expect(slot.look() == (first, true))
        #expect(slot.end(first), "not taken back: the thread still holds the loop")
        #expect(slot.look() == (first, false))
        #expect(!slot.takeBack(first), "an attempt that returned is not taken back")

        let second = slot.begin()
        #expect(!slot.takeBack(first), "an older generation is not the one running")
        #expect(slot.takeBack(second))
        #expect(!slot.takeBack(second), "taken back once")
        #expect(!slot.end(second), "the loop went on elsewhere: this thread leaves it alone")
        let third = slot.begin()
        #expect(slot.end(third), "the next inline attempt, on the loop's new thread, keeps it")
    }

    @Test func theWatchTakesTheLoopBackFromALongAttemptOnlyAndOnce() {
        let long = InlineAttemptSlot()
        let quick = InlineAttemptSlot()
        let longTaken = Atomic<Int>(0)
        let quickTaken = Atomic<Int>(0)
        InlineAttemptWatch.shared.watch(long) { longTaken.add(1, ordering: .relaxed) }
        InlineAttemptWatch.shared.watch(quick) { quickTaken.add(1, ordering: .relaxed) }
        defer {
            InlineAttemptWatch.shared.unwatch(long)
            InlineAttemptWatch.shared.unwatch(quick)
        }
        let generation = long.begin()
        // The quick slot runs an instant attempt every 100 µs for 100 ms: never one tick long
        // (the long one is seen running through about a hundred ticks).
        let start = Date()
        while Date().timeIntervalSince(start) < 0.1 {
            let g = quick.begin()
            #expect(quick.end(g))
            Thread.sleep(forTimeInterval: 100e-6)
        }
        #expect(longTaken.load(ordering: .relaxed) == 1)
        #expect(!long.end(generation))
        #expect(quickTaken.load(ordering: .relaxed) == 0)
    }

    /// With no attempt inline for a while the watch sleeps (no wake-up a millisecond during a
    /// long step); the next inline attempt wakes it, and is still taken back if it runs long.
    @Test func theWatchSleepsWhenNothingRunsInlineAndTheNextAttemptWakesIt() {
        let slot = InlineAttemptSlot()
        let taken = Atomic<Int>(0)
        InlineAttemptWatch.shared.watch(slot) { taken.add(1, ordering: .relaxed) }
        defer { InlineAttemptWatch.shared.unwatch(slot) }
        #expect(slot.end(slot.begin()))
        let asleep = waitUntil(5) { InlineAttemptWatch.shared.asleep.load(ordering: .sequentiallyConsistent) }
        #expect(asleep, "the watch still ticks with nothing running inline")
        let generation = slot.begin()
        #expect(waitUntil(5) { taken.load(ordering: .relaxed) == 1 }, "the attempt that began while the watch slept was not taken back")
        #expect(!slot.end(generation))
    }

    private func waitUntil(_ seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.005)
        }
        return condition()
    }
}
