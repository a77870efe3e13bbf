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
        #expect(slot.runningGeneration() == first)
        #expect(slot.end(first), "not taken back: the thread still holds the loop")
        #expect(slot.runningGeneration() == nil)
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
}
