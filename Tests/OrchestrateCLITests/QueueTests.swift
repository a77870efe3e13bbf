import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// The transfer queue: `submit` + `serve`, ordering, the control verbs on a live `serve`,
/// several workers on one store, and a worker killed with runs in flight.
@Suite(.serialized) struct QueueTests {
    let h = Harness()

    /// A workflow whose first step appends the run's id to `log`, then sleeps `ms`, then appends
    /// again; with a compensation that appends "undo <run>".
    func workflow(ms: Int = 600, name: String = "job.yaml") -> String {
        let log = h.path("log")
        return h.workflow("""
            version: 1
            name: job
            inputs:
              ms: { type: integer, default: \(ms) }
            steps:
              begin:
                uses: test.append
                with: { file: "\(log)", line: "begin ${{ run.id }}" }
                compensate:
                  uses: test.append
                  with: { file: "\(log)", line: "undo ${{ run.id }}" }
              work: { uses: test.sleep, needs: [begin], with: { ms: "${{ inputs.ms }}" } }
              end:
                uses: test.append
                needs: [work]
                with: { file: "\(log)", line: "end ${{ run.id }}" }
            """, name: name)
    }

    func submit(_ file: String, _ extra: [String] = []) throws -> String {
        let result = try h.orchestrate(["submit", file] + extra)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func serve(_ maxParallel: Int = 1) throws -> StartedProcess {
        try h.start(["serve", "--max-parallel", "\(maxParallel)"])
    }

    func stopServe(_ process: StartedProcess) {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
    }

    func runStatus(_ id: String) -> String? { try? h.status(id)["status"]?.stringValue }

    /// The order in which runs began (their first log line).
    func beginOrder() -> [String] {
        h.lines("log").filter { $0.hasPrefix("begin ") }.map { String($0.dropFirst(6)) }
    }

    @Test func runsStartInSubmissionOrderPriorityJumpsAheadAndRunNowPreempts() throws {
        let file = workflow(ms: 400)
        let ids = try (1...5).map { try submit(file, ["--id", "job\($0)"]) }
        let urgent = try submit(file, ["--id", "urgent", "--priority", "10"])
        let worker = try serve(1)
        defer { stopServe(worker) }
        // Let the first two start, then ask for job5 at once.
        #expect(h.waitFor { beginOrder().count == 2 })
        let running = try #require(beginOrder().last)
        #expect(try h.orchestrate(["run-now", "job5"]).status == 0)
        #expect(h.waitFor(60) { ids.allSatisfy { runStatus($0) == "succeeded" } && runStatus(urgent) == "succeeded" })
        let order = beginOrder()
        #expect(Array(order.prefix(2)) == ["urgent", "job1"])
        #expect(running == "job1")
        // job5 jumped in; the pre-empted job1 resumed right after it, then the rest in order.
        #expect(order.filter { $0 != "job1" } == ["urgent", "job5", "job2", "job3", "job4"])
        #expect(h.lines("log").filter { $0 == "end job1" }.count == 1)
        let job1Events = Harness.events(try h.orchestrate(["events", "job1"]))
        #expect(job1Events.ofType("run.interrupted").count == 1)
        #expect(job1Events.ofType("run.resumed").count == 1)
    }

    @Test func cancelStopPauseUnpauseRetryAndDeleteOnALiveServe() throws {
        let file = workflow(ms: 1500)
        let a = try submit(file, ["--id", "a"])
        // b sleeps long enough to still be running when `stop` reaches it on a loaded machine.
        let b = try submit(file, ["--id", "b", "--input", "ms=6000"])
        let worker = try serve(1)
        defer { stopServe(worker) }

        // pause: a stops, keeps its slot (b does not start), then continues.
        #expect(h.waitFor { runStatus(a) == "running" && beginOrder() == ["a"] })
        #expect(try h.orchestrate(["pause", a]).status == 0)
        #expect(h.waitFor { runStatus(a) == "paused" })
        Thread.sleep(forTimeInterval: 0.8)
        #expect(runStatus(b) == "queued", "a paused run keeps its slot")
        #expect(try h.orchestrate(["unpause", a]).status == 0)
        #expect(h.waitFor(30) { runStatus(a) == "succeeded" })

        // stop: b goes back to the queue behind c, which runs first.
        #expect(h.waitFor { runStatus(b) == "running" })
        let c = try submit(file, ["--id", "c", "--input", "ms=100"])
        #expect(try h.orchestrate(["stop", b]).status == 0)
        #expect(h.waitFor(30) { runStatus(c) == "succeeded" })
        #expect(h.waitFor(30) { runStatus(b) == "succeeded" })
        #expect(beginOrder().firstIndex(of: "c")! > beginOrder().firstIndex(of: "b")!)
        #expect(h.lines("log").filter { $0 == "begin b" }.count == 1, "a stopped run keeps its finished steps")

        // cancel: interrupted, compensated, deactivated.
        let d = try submit(file, ["--id", "d", "--input", "ms=20000"])
        #expect(h.waitFor { runStatus(d) == "running" && beginOrder().contains("d") })
        let sent = Date()
        #expect(try h.orchestrate(["cancel", d]).status == 0)
        #expect(h.waitFor(10) { runStatus(d) == "cancelled" })
        #expect(Date().timeIntervalSince(sent) < 3, "a control verb takes effect on a live serve within a second or so")
        #expect(h.lines("log").contains("undo d"))

        // retry: only what did not succeed runs again (begin was compensated, so it runs again).
        #expect(try h.orchestrate(["retry", d, "--detach"]).status == 0)
        #expect(h.waitFor { runStatus(d) == "running" })
        #expect(try h.orchestrate(["delete", d]).status == 2, "a running run cannot be deleted")
        #expect(try h.orchestrate(["cancel", d]).status == 0)
        #expect(h.waitFor(10) { runStatus(d) == "cancelled" })

        // delete: a finished run disappears.
        #expect(try h.orchestrate(["delete", a]).status == 0)
        #expect(try h.runIDs().contains(a) == false)
    }

    @Test func aPassiveQueueStartsNothingAndPicksUpTheSameRunsAgain() throws {
        let file = workflow(ms: 1500)
        let a = try submit(file, ["--id", "a"])
        let worker = try serve(2)
        defer { stopServe(worker) }
        #expect(h.waitFor { runStatus(a) == "running" })
        #expect(try h.orchestrate(["queue", "stop"]).status == 0)
        #expect(h.waitFor { runStatus(a) == "queued" })
        let b = try submit(file, ["--id", "b", "--input", "ms=10"])
        Thread.sleep(forTimeInterval: 0.8)
        #expect(runStatus(b) == "queued")
        #expect(try h.orchestrate(["queue", "start"]).status == 0)
        #expect(h.waitFor(30) { runStatus(a) == "succeeded" && runStatus(b) == "succeeded" })
        #expect(h.lines("log").filter { $0 == "begin a" }.count == 1)
    }

    /// `queue stop --queue NAME`: that queue's running run goes back to its place and none of its
    /// runs starts, while the same serve goes on with its other queue; a store-wide `queue start`
    /// leaves the named stop alone, and `queue start --queue NAME` picks the same run up again.
    @Test func aNamedQueueStopsOnItsOwnWhileTheOtherQueuesGoOn() throws {
        let file = workflow(ms: 1500)
        let up1 = try submit(file, ["--id", "up1", "--queue", "uploads"])
        let worker = try h.start(["serve", "--max-parallel", "3", "--queue", "uploads", "--queue", "downloads"])
        defer { stopServe(worker) }
        #expect(h.waitFor { runStatus(up1) == "running" })
        let stopped = try h.orchestrate(["queue", "stop", "--queue", "uploads"])
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(stopped.stdout.contains("queue uploads stopped"), "\(stopped.stdout)")
        #expect(h.waitFor { runStatus(up1) == "queued" }, "the stopped queue's run goes back to its place")
        let up2 = try submit(file, ["--id", "up2", "--queue", "uploads", "--input", "ms=10"])
        let down = try submit(file, ["--id", "down", "--queue", "downloads", "--input", "ms=10"])
        #expect(h.waitFor(20) { runStatus(down) == "succeeded" }, "the other queue goes on")
        #expect(try h.orchestrate(["queue", "start"]).status == 0)
        Thread.sleep(forTimeInterval: 0.8)
        #expect(runStatus(up1) == "queued" && runStatus(up2) == "queued", "a store-wide start leaves a queue stopped by name")
        #expect(h.lines("log").filter { $0 == "begin up2" }.isEmpty)
        #expect(try h.orchestrate(["queue", "start", "--queue", "uploads"]).status == 0)
        #expect(h.waitFor(30) { runStatus(up1) == "succeeded" && runStatus(up2) == "succeeded" })
        #expect(h.lines("log").filter { $0 == "begin up1" }.count == 1, "the interrupted run resumed, it did not start over")
        #expect(try h.orchestrate(["queue", "rate", "20M", "--queue", "uploads"]).status == 2)
        #expect(try h.orchestrate(["queue", "stop", "--queue", "no spaces"]).status == 2)
    }

    @Test func twoWorkersOnOneStoreRunEachOfFiftyRunsExactlyOnce() throws {
        let file = workflow(ms: 20)
        for n in 1...50 { _ = try submit(file, ["--id", "r\(n)"]) }
        let first = try serve(4)
        let second = try serve(4)
        defer {
            stopServe(first)
            stopServe(second)
        }
        #expect(h.waitFor(120) { h.lines("log").filter { $0.hasPrefix("end ") }.count >= 50 })
        Thread.sleep(forTimeInterval: 0.5)
        let begins = h.lines("log").filter { $0.hasPrefix("begin ") }
        #expect(begins.count == 50)
        #expect(Set(begins).count == 50)
        let owners = Set(Harness.events(try h.orchestrate(["events"])).ofType("run.started").compactMap { $0["data"]?["pid"]?.intValue })
        #expect(owners.count == 2, "both workers took runs")
        // Each run's last commit gave it up: no finished run is left held by a worker.
        let held = try h.openStore().listRuns(RunFilter()).filter { $0.owner != nil }.map(\.id)
        #expect(held.isEmpty, "still owned after finishing: \(held)")
    }

    @Test func aKilledServeLeavesItsRunsToTheNextOne() throws {
        let file = workflow(ms: 1500)
        for n in 1...3 { _ = try submit(file, ["--id", "k\(n)"]) }
        let worker = try serve(3)
        // Kill once every run's first step is journaled as done (a step killed between its
        // effect and its journal entry runs again: at least once, by design).
        func beginJournaled(_ id: String) -> Bool {
            (try? h.status(id)["steps"]?.arrayValue?.contains {
                $0["id"]?.stringValue == "begin" && $0["status"]?.stringValue == "succeeded"
            }) == true
        }
        #expect(h.waitFor { (1...3).allSatisfy { beginJournaled("k\($0)") } })
        kill(worker.processIdentifier, SIGKILL)
        worker.waitUntilExit()
        let next = try serve(3)
        defer { stopServe(next) }
        #expect(h.waitFor(30) { (1...3).allSatisfy { runStatus("k\($0)") == "succeeded" } })
        for n in 1...3 {
            #expect(h.lines("log").filter { $0 == "begin k\(n)" }.count == 1)
            #expect(h.lines("log").filter { $0 == "end k\(n)" }.count == 1)
        }
    }

    /// A serve killed (`kill -9`) in the middle of a burst of one-step runs, whose journal
    /// commits it groups into shared transactions: every run it printed as succeeded (printed
    /// only once committed) is succeeded in the store, and the next serve finishes the rest.
    /// A step runs again only where its success was not journaled.
    @Test func aServeKilledMidBurstLosesNoRunItReportedDone() throws {
        let log = h.path("log")
        let file = h.workflow("""
            version: 1
            name: quick
            steps:
              only: { uses: test.append, with: { file: "\(log)", line: "${{ run.id }}" } }
            """, name: "quick.yaml")
        let runs = 1000
        let batch = h.dir.write("runs.jsonl", String(repeating: "{}\n", count: runs)).path
        #expect(try h.orchestrate(["submit", file, "--batch", batch]).status == 0)
        let worker = try SpawnedChild([TestPaths.orchestrate.path, "serve", "--max-parallel", "32"] + h.baseArguments,
                                      stdout: h.path("serve.out"), stderr: h.path("serve.err"))
        /// The runs the serve printed as succeeded ("DATE TIME RUN succeeded").
        func reported() -> [String] {
            h.lines("serve.out").compactMap { line in
                let words = line.split(separator: " ")
                return words.count == 4 && words[3] == "succeeded" ? String(words[2]) : nil
            }
        }
        #expect(h.waitFor(60) { reported().count >= 50 })
        kill(worker.pid, SIGKILL)
        #expect(worker.wait(timeout: 10) != nil)
        let done = reported()
        #expect(done.count < runs, "killed mid-burst")
        let store = try h.openStore()
        for id in done { #expect(try store.run(id)?.status == .succeeded, "\(id) was reported done") }
        let ids = try h.runIDs()
        #expect(ids.count == runs)
        let next = try serve(32)
        defer { stopServe(next) }
        #expect(h.waitFor(180) { (try? store.listRuns(RunFilter(statuses: [.succeeded])).count) == runs })
        let appended = Dictionary(grouping: h.lines("log"), by: { $0 })
        for id in ids { #expect((1...2).contains(appended[id]?.count ?? 0), "\(id) ran \(appended[id]?.count ?? 0) times") }
        for id in done { #expect(appended[id]?.count == 1, "\(id), reported done, ran again") }
    }

    @Test func serveSaysWhenItAdoptsAForegroundRunWhoseProcessDied() throws {
        let file = workflow(ms: 30_000)
        let foreground = try SpawnedChild([TestPaths.orchestrate.path, "run", file] + h.baseArguments,
                                          stdout: h.path("run.out"), stderr: h.path("run.err"))
        #expect(h.waitFor { beginOrder().count == 1 })
        let id = try #require(beginOrder().first)
        kill(foreground.pid, SIGKILL)
        #expect(foreground.wait(timeout: 10) != nil)
        let worker = try SpawnedChild([TestPaths.orchestrate.path, "serve"] + h.baseArguments,
                                      stdout: h.path("serve.out"), stderr: h.path("serve.err"))
        defer {
            kill(worker.pid, SIGTERM)
            _ = worker.wait(timeout: 30)
        }
        let said = h.waitFor(30) { h.read("serve.out").contains("\(id) resumed (job): adopted from pid \(foreground.pid) on ") }
        #expect(said, "\(h.read("serve.out"))")
    }

    @Test func sigtermLeavesRunsQueuedInTheirPlace() throws {
        let file = workflow(ms: 3000)
        let a = try submit(file, ["--id", "a"])
        let worker = try serve(1)
        #expect(h.waitFor { runStatus(a) == "running" })
        kill(worker.processIdentifier, SIGTERM)
        worker.waitUntilExit()
        #expect(worker.terminationStatus == 0)
        #expect(runStatus(a) == "queued")
        let next = try serve(1)
        defer { stopServe(next) }
        #expect(h.waitFor(30) { runStatus(a) == "succeeded" })
        #expect(h.lines("log").filter { $0 == "begin a" }.count == 1)
    }

    @Test func eventsFollowStartedLateShowsTheHistoryThenLiveEvents() throws {
        let file = workflow(ms: 2500)
        let a = try submit(file, ["--id", "a"])
        let worker = try serve(1)
        defer { stopServe(worker) }
        #expect(h.waitFor { beginOrder() == ["a"] })
        // Start following after the run began: the history comes first, then what happens next.
        let follow = Process()
        follow.executableURL = TestPaths.orchestrate
        follow.arguments = ["events", a, "--follow"] + h.baseArguments
        let out = Pipe()
        follow.standardOutput = out
        try follow.run()
        follow.waitUntilExit()  // --follow ends once the run has finished and everything is printed
        let events = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .split(separator: "\n").compactMap { try? JSONValue(parsing: String($0)) }
        let types = events.compactMap { $0["type"]?.stringValue }
        #expect(types.first == "run.added")
        #expect(types.contains("run.started"))
        #expect(types.last == "run.finished")
        let seqs = events.compactMap { $0["seq"]?.intValue }
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
    }
}
