import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// The schedule side of the `StateStore` contract, on both stores.
extension StoreUnderTest {
    func scheduleEntries(_ name: String = "nightly", count: Int = 2, lastDue: Int64 = 1_000) -> [ScheduleRecord] {
        (1...count).map { entry in
            var r = ScheduleRecord(name: name, entry: entry, workflowName: "wf", workflowFile: "/wf.yaml",
                                   workflowSource: "name: wf", cron: "\(entry) * * * *", timeZone: "Europe/Berlin",
                                   inputs: ["source": "/media"], overlap: "skip", catchup: entry == 2 ? 3_600 : nil,
                                   lastDue: lastDue, createdAt: 5)
            r.queue = "uploads"
            r.priority = 3
            return r
        }
    }

    func scheduledRun(_ id: String) -> (run: RunRecord, events: [EventRecord]) {
        let run = RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf",
                            inputs: [:], status: .queued, createdAt: 1, runDir: RunRecord.runDirectory(for: id))
        return (run, [EventRecord(runID: id, time: 1, type: .runAdded)])
    }
}

@Suite(.serialized) struct ScheduleStoreContractTests {
    @Test(arguments: StoreKind.allCases)
    func schedulesAreRegisteredListedPausedResumedAndRemoved(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.store.saveSchedule(t.scheduleEntries())
        try t.store.saveSchedule(t.scheduleEntries("hourly", count: 1))
        let other = try t.reopen()
        #expect(try other.schedules() == t.scheduleEntries("hourly", count: 1) + t.scheduleEntries())

        // Registering again keeps each entry's place in time and pause; a shorter list drops the rest.
        #expect(try t.store.advanceSchedule(name: "nightly", entry: 1, from: 1_000, to: 1_060, run: t.scheduledRun("a"), events: []))
        #expect(try t.store.setSchedulePaused("nightly", paused: true, at: 1_100))
        var replacement = t.scheduleEntries(count: 1, lastDue: 5)
        replacement[0].cron = "@daily"
        try t.store.saveSchedule(replacement)
        let nightly = try other.schedules().filter { $0.name == "nightly" }
        #expect(nightly.count == 1)
        #expect(nightly[0].cron == "@daily" && nightly[0].lastDue == 1_060 && nightly[0].lastRunID == "a" && nightly[0].paused)

        // Resuming moves the entry past the time it was paused for.
        #expect(try t.store.setSchedulePaused("nightly", paused: false, at: 2_000))
        #expect(try other.schedules().first { $0.name == "nightly" }?.lastDue == 2_000)
        #expect(try t.store.setSchedulePaused("nope", paused: true, at: 0) == false)

        #expect(try t.store.removeSchedule("nightly"))
        #expect(try t.store.removeSchedule("nightly") == false)
        #expect(try other.schedules().map(\.name) == ["hourly"])
        #expect(try other.run("a") != nil, "removing a schedule leaves its runs")
    }

    @Test(arguments: StoreKind.allCases)
    func aDueTimeStartsOneRunHoweverManyRaceForIt(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.store.saveSchedule(t.scheduleEntries(count: 1))
        let stores = try (0..<4).map { _ in try t.reopen() }
        // Four processes race for each of 20 due times, each with a run of its own.
        var lastDue: Int64 = 1_000
        for round in 0..<20 {
            let (expected, due) = (lastDue, lastDue + 60)
            let won = Collected<String>()
            DispatchQueue.concurrentPerform(iterations: 4) { worker in
                let id = "run-\(round)-\(worker)"
                if (try? stores[worker].advanceSchedule(name: "nightly", entry: 1, from: expected, to: due,
                                                        run: t.scheduledRun(id), events: [])) == true {
                    won.add(id)
                }
            }
            #expect(won.all.count == 1)
            lastDue = due
        }
        let runs = try t.store.listRuns(RunFilter())
        #expect(runs.count == 20)
        let entry = try #require(try t.store.schedules().first)
        #expect(entry.lastDue == 1_000 + 20 * 60)
        #expect(runs.map(\.id).contains(entry.lastRunID ?? ""))
    }

    @Test(arguments: StoreKind.allCases)
    func theClaimAndTheRunAreOneTransaction(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.store.saveSchedule(t.scheduleEntries(count: 1))
        try t.makeRun("taken")
        // The run cannot be created (its id exists): the claim is not kept either.
        #expect(throws: StoreError.self) {
            try t.store.advanceSchedule(name: "nightly", entry: 1, from: 1_000, to: 1_060, run: t.scheduledRun("taken"), events: [])
        }
        #expect(try t.store.schedules().first?.lastDue == 1_000)
        // A time without a run (skipped) moves the entry and journals its event, together.
        let skipped = EventRecord(runID: nil, time: 2, type: .scheduleSkipped, data: ["schedule": "nightly"])
        #expect(try t.store.advanceSchedule(name: "nightly", entry: 1, from: 1_000, to: 1_060, run: nil, events: [skipped]))
        #expect(try t.store.events(runID: nil, afterSeq: 0, limit: 10).map(\.type).contains(.scheduleSkipped))
        #expect(try t.store.schedules().first?.lastDue == 1_060 && t.store.schedules().first?.lastRunID == nil)
        // A stale claim (from a process that read the entry before) and a paused entry do nothing.
        #expect(try t.store.advanceSchedule(name: "nightly", entry: 1, from: 1_000, to: 1_120, run: t.scheduledRun("late"), events: []) == false)
        #expect(try t.store.setSchedulePaused("nightly", paused: true, at: 1_060))
        #expect(try t.store.advanceSchedule(name: "nightly", entry: 1, from: 1_060, to: 1_120, run: t.scheduledRun("late"), events: []) == false)
        #expect(try t.store.run("late") == nil)
    }
}
