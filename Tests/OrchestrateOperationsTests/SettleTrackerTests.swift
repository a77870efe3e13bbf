import Foundation
@testable import OrchestrateOperations
import Testing

/// When a watched file has settled (`SettleTracker`): the rule, and its cost with a folder of
/// 100,000 files waiting, which the watcher pays at every wake-up.
@Suite struct SettleTrackerTests {
    func signature(_ size: Int64, _ mtime: Int64 = 1) -> FileSignature { FileSignature(size: size, mtimeNanoseconds: mtime) }

    @Test func aFileIsDueOnceUnchangedForTheSettleTimeOldestFirst() {
        var tracker = SettleTracker(settle: 2)
        tracker.observe("b", signature(1), now: 0)
        tracker.observe("a", signature(1), now: 0)
        tracker.observe("c", signature(1), now: 1)
        #expect(tracker.due(now: 1.9).isEmpty)
        #expect(tracker.nextDue == 2)
        #expect(tracker.due(now: 2).map(\.path) == ["a", "b"])
        #expect(tracker.due(now: 3).map(\.path) == ["a", "b", "c"])
        // Seen again unchanged: its wait goes on; changed: it starts again.
        tracker.observe("a", signature(1), now: 2.5)
        tracker.observe("b", signature(2), now: 2.5)
        #expect(tracker.due(now: 3).map(\.path) == ["a", "c"])
        #expect(tracker.due(now: 3).first?.signature == signature(1))
        tracker.forget("a")
        #expect(tracker.nextDue == 3)
        #expect(tracker.due(now: 4.5).map(\.path) == ["c", "b"])
        #expect(tracker.due(now: 4.5).last?.signature == signature(2))
        // Gone: forgotten.
        tracker.observe("c", nil, now: 4.5)
        #expect(!tracker.isTracked("c") && tracker.count == 1)
        tracker.forget("b")
        #expect(tracker.nextDue == nil && tracker.due(now: .infinity).isEmpty)
        // Times out of order (only a test passes them) still come out oldest first.
        tracker.observe("late", signature(1), now: 10)
        tracker.observe("early", signature(1), now: 5)
        #expect(tracker.due(now: 20).map(\.path) == ["early", "late"])
        #expect(tracker.nextDue == 7)
    }

    /// A full tracker leaves a new file out and says so (the watcher then scans again once half
    /// of it is free); a file it holds is still followed, and what was handed over makes room.
    @Test func aFullTrackerLeavesNewFilesOutAndSaysSo() {
        var tracker = SettleTracker(settle: 1, capacity: 3)
        for name in ["a", "b", "c"] { tracker.observe(name, signature(1), now: 0) }
        #expect(!tracker.missedSome)
        tracker.observe("d", signature(1), now: 0.5)
        #expect(tracker.missedSome && !tracker.isTracked("d") && tracker.count == 3)
        tracker.observe("b", signature(2), now: 0.5)  // held: its change restarts its wait
        #expect(tracker.due(now: 1).map(\.path) == ["a", "c"])
        tracker.forget("a")
        tracker.clearMissed()
        tracker.observe("d", signature(1), now: 1)
        #expect(tracker.isTracked("d") && !tracker.missedSome)
        #expect(tracker.due(now: 2, limit: 2).map(\.path) == ["c", "b"])
        #expect(tracker.due(now: 2).map(\.path) == ["c", "b", "d"])
    }

    /// A full tracker held by files that never settle (touched every few seconds by someone who
    /// can write the folder): a newcomer takes the place of the file admitted longest ago once
    /// that one has kept changing for `holdLimit`; a file that only waits to settle keeps its
    /// place, and one given up is left for a later scan (`missedSome`).
    @Test func filesThatNeverSettleCannotStarveTheOthers() {
        var tracker = SettleTracker(settle: 1, capacity: 3)
        #expect(tracker.holdLimit == 60)
        for (n, name) in ["touched-1", "touched-2", "touched-3"].enumerated() { tracker.observe(name, signature(1), now: Double(n)) }
        // Touched every 10 s for a minute: they never come due.
        for t in stride(from: 10.0, through: 60, by: 10) {
            for name in ["touched-1", "touched-2", "touched-3"] { tracker.observe(name, signature(Int64(t)), now: t) }
        }
        tracker.observe("early", signature(1), now: 30)  // before the hold limit: left out
        #expect(!tracker.isTracked("early") && tracker.missedSome && tracker.givenUp == 0)
        tracker.clearMissed()
        tracker.observe("frame-1", signature(1), now: 61)
        #expect(tracker.isTracked("frame-1") && !tracker.isTracked("touched-1") && tracker.givenUp == 1)
        #expect(tracker.missedSome, "the one given up is for a later scan")
        tracker.observe("frame-2", signature(1), now: 62)
        tracker.observe("frame-3", signature(1), now: 63)  // touched-3 was admitted at 2: 61 s ago
        #expect(tracker.isTracked("frame-2") && tracker.isTracked("frame-3") && tracker.givenUp == 3)
        // The newcomers only wait to settle: none gives its place up, however long they wait.
        tracker.observe("frame-4", signature(1), now: 200)
        #expect(!tracker.isTracked("frame-4") && tracker.givenUp == 3)
        #expect(tracker.due(now: 200).map(\.path) == ["frame-1", "frame-2", "frame-3"])
    }

    /// Places given up round after round (every file keeps changing, a newcomer each round):
    /// what the tracker holds stays bounded by its capacity, not by the rounds.
    @Test func placesGivenUpRoundAfterRoundHoldNothingMore() {
        var tracker = SettleTracker(settle: 1, capacity: 2)
        tracker.observe("n-a", signature(1), now: 0)
        tracker.observe("n-b", signature(1), now: 0)
        for round in 1 ... 10000 {
            let t = Double(round) * 100
            for path in tracker.paths { tracker.observe(path, signature(Int64(round) + 1), now: t - 1) }
            tracker.observe("n-\(round)", signature(1), now: t)
            #expect(tracker.isTracked("n-\(round)"))
        }
        #expect(tracker.givenUp == 10000 && tracker.count == 2)
        // Its arrays keep up to a few thousand slots between trims (as the waits' do), whatever
        // the rounds; kept whole, the admissions alone would be 10,002.
        #expect(tracker.heldSlots < 8192, "\(tracker.heldSlots)")
    }

    /// 100,000 files dropped at once: the tracker holds its capacity of them, not all; emptied
    /// once they were handed over, it holds no table at all. Without the bound it held every one
    /// (about 120 bytes a file) and kept its largest table for good.
    @Test func whatTheTrackerHoldsIsBoundedAndGivenBackOnceEmpty() {
        var tracker = SettleTracker(settle: 1)
        for i in 0..<100_000 { tracker.observe("shot/frame_\(i).dpx", signature(4096), now: 0) }
        #expect(tracker.count == SettleTracker.defaultCapacity && tracker.missedSome)
        #expect(tracker.heldSlots >= SettleTracker.defaultCapacity && tracker.heldSlots <= 4 * SettleTracker.defaultCapacity)
        while case let batch = tracker.due(now: 1, limit: 256), !batch.isEmpty {
            for file in batch { tracker.forget(file.path) }
        }
        #expect(tracker.count == 0 && tracker.heldSlots == 0)
    }

    /// Files still being written behind one that waits (a poll scan every 2 s sees each grown,
    /// and restarts its wait): their old waits are dropped, not kept until the front reaches
    /// them. Without that, 50 files seen 2,000 times each left 100,000 entries behind.
    @Test func filesStillBeingWrittenLeaveNoWaitsBehind() {
        var tracker = SettleTracker(settle: 3600)
        tracker.observe("first.mxf", signature(1), now: 0)
        for scan in 1...2_000 {
            for file in 0..<50 { tracker.observe("growing_\(file).mxf", signature(Int64(scan)), now: Double(scan)) }
        }
        #expect(tracker.count == 51)
        #expect(tracker.heldSlots <= 4 * 1024, "\(tracker.heldSlots) slots for 51 files waiting")
        #expect(tracker.due(now: 3600).map(\.path) == ["first.mxf"])
        #expect(tracker.due(now: 5600).count == 51)
    }

    /// 100,000 files dropped, then 2,000 wake-ups before any is due (each a batch of inotify
    /// events): a wake-up costs what is due, not what is tracked. Looking at every candidate at
    /// each wake-up (400 million looks) took far longer than the bound; this takes milliseconds.
    @Test func aWakeUpCostsWhatIsDueNotWhatIsTracked() {
        var tracker = SettleTracker(settle: 1, capacity: 100_000)
        for i in 0..<100_000 { tracker.observe("shot/frame_\(i).dpx", signature(4096), now: Double(i) / 100_000) }
        let started = Date()
        var due = 0
        for wake in 0..<2_000 {
            due += tracker.due(now: 0.5 + Double(wake) / 100_000).count
            _ = tracker.nextDue
        }
        let elapsed = Date().timeIntervalSince(started)
        #expect(due == 0)
        #expect(elapsed < 3, "2,000 wake-ups over 100,000 waiting files took \(elapsed) s")
        // Then all at once, oldest first; handed over, each forgotten.
        let all = tracker.due(now: 2)
        #expect(all.count == 100_000 && all.first?.path == "shot/frame_0.dpx" && all.last?.path == "shot/frame_99999.dpx")
        for file in all { tracker.forget(file.path) }
        #expect(tracker.count == 0 && tracker.nextDue == nil && tracker.heldSlots == 0)
    }
}
