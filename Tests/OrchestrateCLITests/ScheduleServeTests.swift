import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// Schedules end to end: `schedule add`, `schedules`, and real `serve` processes firing them,
/// with time injected through `ORCHESTRATE_TEST_CLOCK_FILE` (no test waits a real minute).
@Suite(.serialized) struct ScheduleServeTests {
    let h = Harness()

    /// 2026-11-23 10:00:30 UTC plus `seconds`.
    static func at(_ hhmm: String, _ seconds: Int64 = 0) -> Int64 {
        let parts = hhmm.split(separator: ":").map { Int($0)! }
        return WallTime(year: 2026, month: 11, day: 23, hour: parts[0], minute: parts[1]).utcSeconds + seconds
    }

    var clockFile: String { h.path("clock") }
    var env: [String: String] { ["ORCHESTRATE_TEST_CLOCK_FILE": clockFile, "TZ": "UTC"] }

    func setClock(_ time: Int64) {
        // Written whole and renamed, so a serve never reads half a number.
        let temporary = clockFile + ".new"
        try! "\(time)\n".write(toFile: temporary, atomically: false, encoding: .utf8)
        rename(temporary, clockFile)
    }

    /// A workflow that logs its run and sleeps `inputs.ms`, with the given `on.schedule` entries.
    func workflow(_ schedule: String, name: String = "tick") -> String {
        h.workflow("""
            version: 1
            name: \(name)
            inputs:
              ms: { type: integer, default: 0 }
              tag: { type: string, default: "-" }
            on:
              schedule:
            \(schedule)
            steps:
              mark: { uses: test.append, with: { file: "\(h.path("log"))", line: "${{ inputs.tag }} ${{ run.id }}" } }
              work: { uses: test.sleep, needs: [mark], with: { ms: "${{ inputs.ms }}" } }
            """, name: "\(name).yaml")
    }

    func add(_ file: String, _ extra: [String] = []) throws {
        let result = try h.orchestrate(["schedule", "add", file] + extra, environment: env)
        #expect(result.status == 0, "\(result.stderr)")
    }

    func serve(node: String? = nil) throws -> StartedProcess {
        try h.start(["serve", "--max-parallel", "4"] + (node.map { ["--node", $0] } ?? []), environment: env)
    }

    func stop(_ process: StartedProcess) {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
    }

    /// The runs of schedule `name`: the due time each was started for, in order, with its status.
    func runs(_ name: String) throws -> [(due: String, status: RunStatus, tag: String)] {
        try h.openStore().listRuns(RunFilter(labels: ["schedule": name]))
            .map { (due: $0.labels["scheduled_for"] ?? "?", status: $0.status, tag: $0.inputs["tag"]?.stringValue ?? "") }
            .sorted { $0.due < $1.due }
    }

    func scheduleEvents(_ type: EventType) throws -> [JSONValue] {
        try h.openStore().events(runID: nil, afterSeq: 0, limit: 10_000).filter { $0.type == type }.map(\.data)
    }

    static func due(_ hhmm: String) -> String { "2026-11-23T\(hhmm):00Z" }

    @Test func twoServesOnOneStoreStartOneRunPerDueTime() throws {
        setClock(Self.at("10:00", 30))
        try add(workflow("      - { cron: \"* * * * *\" }"))
        // Two nodes (on PostgreSQL, ORCHESTRATE_TEST_STORE=postgres, as two machines would be).
        let a = try serve(node: "bay-1")
        let b = try serve(node: "bay-2")
        defer { stop(a); stop(b) }
        Thread.sleep(forTimeInterval: 1.5)  // both started and looking at the clock
        #expect(try runs("tick").isEmpty, "registering never starts a past time")
        for (i, minute) in ["10:01", "10:02", "10:03", "10:04", "10:05"].enumerated() {
            setClock(Self.at(minute))
            #expect(h.waitFor { (try? runs("tick").count) == i + 1 })
            Thread.sleep(forTimeInterval: 0.3)  // the other serve's chance to start a second one
        }
        #expect(h.waitFor(30) { (try? runs("tick"))?.allSatisfy { $0.status == .succeeded } == true })
        let done = try runs("tick")
        #expect(done.map(\.due) == ["10:01", "10:02", "10:03", "10:04", "10:05"].map(Self.due))
        #expect(h.lines("log").count == 5)
    }

    @Test func overlapSkipSkipsWhileThePreviousRunGoesAndQueueWaitsForIt() throws {
        setClock(Self.at("10:00", 30))
        let file = workflow("      - { cron: \"* * * * *\", overlap: skip, inputs: { ms: 3000, tag: s } }")
        try add(file, ["--name", "skipper"])
        let queued = workflow("      - { cron: \"* * * * *\", overlap: queue, inputs: { ms: 3000, tag: q } }", name: "queuer")
        try add(queued)
        let worker = try serve()
        defer { stop(worker) }

        setClock(Self.at("10:01"))
        #expect(h.waitFor { (try? runs("skipper").first?.status) == .running && (try? runs("queuer").first?.status) == .running })
        // 10:02 comes while both 10:01 runs are still going.
        setClock(Self.at("10:02"))
        #expect(h.waitFor { (try? scheduleEvents(.scheduleSkipped).count) == 1 })
        #expect(try scheduleEvents(.scheduleSkipped).first?["schedule"]?.stringValue == "skipper")
        #expect(try scheduleEvents(.scheduleSkipped).first?["due"]?.stringValue == Self.due("10:02"))
        #expect(try runs("queuer").count == 1, "the queued time waits for the run before it")
        // Once 10:01's run has ended, the queued 10:02 starts; the skipped one never does.
        #expect(h.waitFor(30) { (try? runs("queuer").count) == 2 })
        #expect(try runs("queuer")[0].status == .succeeded)
        #expect(h.waitFor(30) { (try? runs("skipper").first?.status) == .succeeded })
        setClock(Self.at("10:03"))
        #expect(h.waitFor(30) { (try? runs("skipper").count) == 2 })
        #expect(try runs("skipper").map(\.due) == [Self.due("10:01"), Self.due("10:03")])
        #expect(h.waitFor(30) { (try? runs("queuer"))?.map(\.due) == ["10:01", "10:02", "10:03"].map(Self.due) })
    }

    @Test func catchupStartsTheTimesMissedWhileServeWasDownAndOnlyThose() throws {
        setClock(Self.at("10:00", 30))
        try add(workflow("""
                  - { cron: "* * * * *", catchup: 3m, overlap: queue, inputs: { tag: a } }
                  - { cron: "* * * * *", inputs: { tag: b } }
            """))
        // serve is down from 10:00:30 to 10:05:50.
        setClock(Self.at("10:05", 50))
        let worker = try serve()
        defer { stop(worker) }
        // a: times up to 3 minutes old are started (10:03, 10:04, 10:05), one after the other;
        // b (no catchup): none; both journal what they missed.
        #expect(h.waitFor(30) { (try? runs("tick"))?.filter { $0.tag == "a" }.count == 3 })
        #expect(h.waitFor { (try? scheduleEvents(.scheduleMissed).count) == 2 })
        #expect(try runs("tick").filter { $0.tag == "a" }.map(\.due) == ["10:03", "10:04", "10:05"].map(Self.due))
        #expect(try runs("tick").filter { $0.tag == "b" }.isEmpty)
        let missed = Dictionary(try scheduleEvents(.scheduleMissed).map { ($0["entry"]?.intValue ?? 0, $0) }, uniquingKeysWith: { a, _ in a })
        #expect(missed[1]?["due"]?.stringValue == Self.due("10:01") && missed[1]?["count"]?.intValue == 2)
        #expect(missed[2]?["due"]?.stringValue == Self.due("10:01") && missed[2]?["count"]?.intValue == 5)
        // Up again: the next time starts for both.
        setClock(Self.at("10:06"))
        #expect(h.waitFor(30) { (try? runs("tick"))?.filter { $0.due == Self.due("10:06") }.count == 2 })
        #expect(h.waitFor(30) { (try? runs("tick"))?.allSatisfy { $0.status == .succeeded } == true })
    }

    @Test func schedulesListsNextTimesInTheirZoneAndPauseResumeRemove() throws {
        setClock(Self.at("10:00", 30))
        let file = workflow("""
                  - { cron: "0 2 * * *" }
                  - { cron: "30 8 * * MON-FRI", timezone: America/New_York, catchup: 1h }
            """, name: "nightly")
        let added = try h.orchestrate(["schedule", "add", file], environment: env.merging(["TZ": "Europe/Berlin"]) { $1 })
        #expect(added.status == 0, "\(added.stderr)")
        let listed = try h.orchestrate(["schedules", "--json"], environment: env)
        let entries = Harness.events(listed)
        #expect(entries.count == 2)
        // Without timezone: the zone of `schedule add` (TZ), not of whoever lists or serves.
        #expect(entries[0]["timezone"]?.stringValue == "Europe/Berlin")
        #expect(entries[0]["next"]?.stringValue == "2026-11-24T01:00:00Z")  // 02:00 CET
        #expect(entries[1]["next"]?.stringValue == "2026-11-23T13:30:00Z")  // 08:30 EST, a Monday
        #expect(entries[1]["catchup_seconds"]?.doubleValue == 3600)
        let text = try h.orchestrate(["schedules"], environment: env).stdout
        #expect(text.contains("nightly#1") && text.contains("next 2026-11-24 02:00 +01:00"), "\(text)")
        #expect(text.contains("catchup 1h ") && !text.contains("3600"), "catchup as the workflow writes it: \(text)")

        // Registering the same name again needs --replace.
        #expect(try h.orchestrate(["schedule", "add", file], environment: env).status == 2)
        #expect(try h.orchestrate(["schedule", "add", file, "--replace"], environment: env).status == 0)

        #expect(try h.orchestrate(["schedule", "pause", "nightly"], environment: env).status == 0)
        #expect(Harness.events(try h.orchestrate(["schedules", "--json"], environment: env)).allSatisfy { $0["paused"] == .bool(true) })
        #expect(try h.orchestrate(["schedule", "resume", "nightly"], environment: env).status == 0)
        let unknown = try h.orchestrate(["schedule", "remove", "nightlx"], environment: env)
        #expect(unknown.status == 2 && unknown.stderr.contains("no schedule named nightlx (schedules: nightly)"), "\(unknown.stderr)")
        #expect(try h.orchestrate(["schedule", "remove", "nightly"], environment: env).status == 0)
        #expect(try h.orchestrate(["schedules"], environment: env).stdout.isEmpty)
    }

    @Test func scheduleRunQueuesOneManualRunAsAFiringWouldAndLeavesTheTimesAlone() throws {
        setClock(Self.at("10:00", 30))
        let file = workflow("""
                  - { cron: "0 2 * * *", inputs: { tag: nightly } }
                  - { cron: "0 3 * * *", inputs: { tag: early } }
            """)
        try add(file, ["--queue", "uploads", "--priority", "5"])
        let before = try h.orchestrate(["schedules", "--json"], environment: env).stdout
        let ambiguous = try h.orchestrate(["schedule", "run", "tick"], environment: env)
        #expect(ambiguous.status == 2 && ambiguous.stderr.contains("schedule tick has 2 entries: name one, as tick#1 or tick#2"),
                "\(ambiguous.stderr)")
        let unknown = try h.orchestrate(["schedule", "run", "tock"], environment: env)
        #expect(unknown.status == 2 && unknown.stderr.contains("no schedule named tock (schedules: tick)"), "\(unknown.stderr)")

        let started = try h.orchestrate(["schedule", "run", "tick#1"], environment: env)
        #expect(started.status == 0, "\(started.stderr)")
        let id = started.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let run = try #require(try h.openStore().run(id))
        #expect(run.status == .queued)
        #expect(run.labels == ["schedule": "tick", "trigger": "manual"])
        #expect(run.inputs["tag"]?.stringValue == "nightly" && run.queue == "uploads" && run.priority == 5)
        #expect(try h.orchestrate(["schedules", "--json"], environment: env).stdout == before, "the schedule's times are unchanged")

        // A serve runs it like any queued run.
        let worker = try h.start(["serve", "--queue", "uploads"], environment: env)
        defer { stop(worker) }
        #expect(h.waitFor(30) { (try? h.openStore().run(id)?.status) == .succeeded })
        #expect(h.lines("log").first?.hasPrefix("nightly ") == true, "\(h.lines("log"))")
    }

    @Test func aBadScheduleIsRefusedWithItsPlaceAndExitStatus2() throws {
        setClock(Self.at("10:00", 30))
        let file = workflow("      - { cron: \"0 2 * * *\", timezone: Mars/Olympus }")
        let result = try h.orchestrate(["schedule", "add", file], environment: env)
        #expect(result.status == 2)
        #expect(result.stderr.contains("\(file):8:40: error: unknown time zone 'Mars/Olympus'"), "\(result.stderr)")
        let plain = h.workflow("version: 1\nname: plain\nsteps:\n  a: { uses: test.append, with: { file: /dev/null, line: x } }\n",
                               name: "plain.yaml")
        let none = try h.orchestrate(["schedule", "add", plain], environment: env)
        #expect(none.status == 2 && none.stderr.contains("has no 'on: schedule:' entries"), "\(none.stderr)")
    }
}
