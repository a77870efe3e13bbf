import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The first Ctrl-C or SIGTERM interrupts a foreground run and leaves it resumable (nothing
/// undone, the commands to continue or undo it printed, exit 130); a second one exits at once;
/// `cancel` of a run nobody executes runs its compensations itself; `resume` of a finished run
/// names `retry`; `retry` runs in the foreground.
@Suite struct InterruptTests {
    let h = Harness()

    /// The shared saga (`Harness.sagaWorkflow`); s4 sleeps (30 s) or checkpoints.
    func saga(step4: String = "  s4: { uses: test.sleep, needs: [s3], with: { ms: 30000 } }") -> String {
        h.sagaWorkflow(step4: step4)
    }

    /// Starts `run` with its output in files; returns it once s4 is under way.
    func startSaga(_ arguments: [String] = []) throws -> SpawnedChild {
        let child = try SpawnedChild([TestPaths.orchestrate.path, "run", saga()] + arguments + h.baseArguments,
                                     stdout: h.path("stdout"), stderr: h.path("stderr"))
        #expect(h.waitFor { h.lines("out").count == 3 })
        Thread.sleep(forTimeInterval: 0.3)  // s4 is sleeping now
        return child
    }

    /// What the next commands look like for this harness's store.
    func next(_ verb: String, _ runID: String) -> String {
        (["orchestrate", verb, runID, "--state", h.state] + h.storeArguments + ["--plugin-path", Harness.pluginDir])
            .joined(separator: " ")
    }

    @Test(arguments: [SIGINT, SIGTERM])
    func theFirstSignalInterruptsNothingIsUndoneAndTheNextCommandsArePrinted(signal: Int32) throws {
        let child = try startSaga()
        let sent = Date()
        kill(child.pid, signal)
        #expect(child.wait(timeout: 15) == 130, "stderr: \(h.read("stderr"))")
        #expect(Date().timeIntervalSince(sent) < 5, "the interrupt must reach a sleeping step quickly")
        #expect(h.lines("undo").isEmpty, "no compensation runs at an interrupt")
        let runID = try #require(try h.runIDs().first)
        let status = try h.status(runID)
        #expect(status["status"]?.stringValue == "interrupted")
        #expect(try h.storeSQL("SELECT status FROM runs WHERE id = '\(runID)'") == "interrupted")
        let s4 = status["steps"]?.arrayValue?.first { $0["id"]?.stringValue == "s4" }
        #expect(s4?["status"]?.stringValue == "pending", "the stopped step starts again on resume")
        let stderr = h.lines("stderr")
        #expect(stderr.contains("  " + next("resume", runID)), "stderr: \(stderr)")
        #expect(stderr.contains("  " + next("cancel", runID)), "stderr: \(stderr)")
        // The process let the run go: `resume` or `cancel` may take it at once.
        #expect(try h.storeSQL("SELECT count(*) FROM runs WHERE owner_pid IS NOT NULL") == "0")
    }

    @Test func resumeAfterAnInterruptContinuesAndUndoesNothing() throws {
        let file = saga(step4: """
              s4: { uses: test.checkpoint, needs: [s3], with: { file: "\(h.path("ticks"))", count: 30, delay_ms: 60 } }
            """)
        let child = try SpawnedChild([TestPaths.orchestrate.path, "run", file] + h.baseArguments,
                                     stdout: h.path("stdout"), stderr: h.path("stderr"))
        #expect(h.waitFor { h.lines("ticks").count >= 8 })
        kill(child.pid, SIGINT)
        #expect(child.wait(timeout: 15) == 130)
        let runID = try #require(try h.runIDs().first)
        let resumed = try h.orchestrate(["resume", runID])
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        #expect(h.lines("out") == ["s1", "s2", "s3"], "finished steps are not run again")
        #expect(h.lines("undo").isEmpty)
        let ticks = h.lines("ticks").compactMap { Int($0) }
        #expect(Set(ticks) == Set(0..<30) && ticks.count <= 31)
        let s4 = try h.status(runID)["steps"]?.arrayValue?.first { $0["id"]?.stringValue == "s4" }
        #expect((s4?["outputs"]?["resumed_from"]?.intValue ?? 0) >= 7, "the checkpoint was handed back: \(String(describing: s4))")
    }

    /// A run left behind (here by kill -9, its owner gone) is undone by `cancel` itself, in
    /// reverse order; no `serve` is needed.
    @Test func cancelOfAnInterruptedRunWhoseOwnerIsGoneRunsItsCompensations() throws {
        let child = try startSaga()
        kill(child.pid, SIGKILL)
        _ = child.wait(timeout: 10)
        let runID = try #require(try h.runIDs().first)
        #expect(try h.status(runID)["status"]?.stringValue == "interrupted")
        let cancelled = try h.orchestrate(["cancel", runID])
        #expect(cancelled.status == 0, "\(cancelled.stdout)\n\(cancelled.stderr)")
        #expect(h.lines("undo") == ["undo s3", "undo s2", "undo s1"])
        let status = try h.status(runID)
        #expect(status["status"]?.stringValue == "cancelled")
        // The killed attempt of s4 was taken back (pending) and never started again.
        let s4 = status["steps"]?.arrayValue?.first { $0["id"]?.stringValue == "s4" }
        #expect(s4?["status"]?.stringValue == "not_run")
    }

    @Test func cancelAfterACtrlCRunsTheCompensations() throws {
        let child = try startSaga()
        kill(child.pid, SIGINT)
        #expect(child.wait(timeout: 15) == 130)
        #expect(h.lines("undo").isEmpty)
        let runID = try #require(try h.runIDs().first)
        let cancelled = try h.orchestrate(["cancel", runID])
        #expect(cancelled.status == 0, "\(cancelled.stdout)\n\(cancelled.stderr)")
        #expect(h.lines("undo") == ["undo s3", "undo s2", "undo s1"])
        #expect(try h.status(runID)["status"]?.stringValue == "cancelled")
    }

    /// A second signal while the first interrupt waits for a step that cannot answer (its
    /// plugin runner is stopped with SIGSTOP) exits at once with 130, nothing undone.
    @Test func aSecondSignalExitsAtOnce() throws {
        let file = saga(step4: "  s4: { uses: test.sleep, needs: [s3], isolation: process, with: { ms: 30000 } }")
        let child = try SpawnedChild([TestPaths.orchestrate.path, "run", file] + h.baseArguments,
                                     stdout: h.path("stdout"), stderr: h.path("stderr"))
        var runner: pid_t?
        #expect(h.waitFor { runner = Self.childProcess(of: child.pid); return runner != nil && h.lines("out").count == 3 })
        let stopped = try #require(runner)
        kill(stopped, SIGSTOP)
        defer { kill(stopped, SIGKILL) }
        kill(child.pid, SIGINT)
        Thread.sleep(forTimeInterval: 1)
        #expect(child.poll() == nil, "the first signal waits for the step to stop")
        let sent = Date()
        kill(child.pid, SIGINT)
        #expect(child.wait(timeout: 10) == 130, "stderr: \(h.read("stderr"))")
        #expect(Date().timeIntervalSince(sent) < 2.5)
        #expect(h.lines("undo").isEmpty)
        let runID = try #require(try h.runIDs().first)
        #expect(h.read("stderr").contains("interrupted again: exiting now; continue the run with: \(next("resume", runID))"),
                "\(h.read("stderr"))")
        #expect(try h.status(runID)["status"]?.stringValue == "interrupted")
    }

    /// A child process of `pid` (from /proc), if any.
    static func childProcess(of pid: pid_t) -> pid_t? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let candidate = pid_t(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == pid { return candidate }
        }
        return nil
    }

    func failedRun() throws -> String {
        let file = h.workflow("""
            version: 1
            name: breaks
            steps:
              one: { uses: test.append, with: { file: "\(h.path("failed-out"))", line: one } }
              two: { uses: test.fail, needs: [one], with: { kind: permanent, message: boom } }
            """)
        #expect(try h.orchestrate(["run", file]).status == 1)
        return try #require(try h.runIDs().first)
    }

    @Test func resumeOfAFailedOrCancelledRunNamesRetry() throws {
        let failed = try failedRun()
        let resumed = try h.orchestrate(["resume", failed])
        #expect(resumed.status == 1)
        #expect(resumed.stderr.contains("already finished: failed"), "\(resumed.stderr)")
        #expect(resumed.stderr.contains(next("retry", failed)), "\(resumed.stderr)")

        let child = try startSaga()
        let runID = try #require(try h.runIDs().first { $0 != failed })
        #expect(try h.orchestrate(["cancel", runID]).status == 0)
        #expect(child.wait(timeout: 15) == 1)
        let again = try h.orchestrate(["resume", runID])
        #expect(again.status == 1)
        #expect(again.stderr.contains("already finished: cancelled"), "\(again.stderr)")
        #expect(again.stderr.contains(next("retry", runID)), "\(again.stderr)")
    }

    /// `retry RUN` runs the run here, to its end (no serve anywhere): the step that failed
    /// passes now, the one that succeeded is not run again. `--detach` only queues it.
    @Test func retryRunsInTheForegroundToTheEnd() throws {
        let file = h.workflow("""
            version: 1
            name: flaky
            steps:
              one: { uses: test.append, with: { file: "\(h.path("out"))", line: one } }
              two:
                uses: test.flaky
                needs: [one]
                retry: { max_attempts: 1 }
                with: { counter_file: "\(h.path("counter"))", fail_times: 1, kind: permanent }
            """)
        #expect(try h.orchestrate(["run", file]).status == 1)
        let runID = try #require(try h.runIDs().first)
        let retried = try h.orchestrate(["retry", runID, "--json"])
        #expect(retried.status == 0, "\(retried.stdout)\n\(retried.stderr)")
        let events = Harness.events(retried)
        #expect(events.ofType("step.started").compactMap { $0["step"]?.stringValue } == ["two"])
        #expect(events.last?["type"]?.stringValue == "run.finished")
        #expect(h.lines("out") == ["one"], "what succeeded is not run again")
        #expect(try h.status(runID)["status"]?.stringValue == "succeeded")

        // --detach: queued for a serve, nothing run here.
        _ = try h.orchestrate(["run", h.workflow("""
            version: 1
            name: breaks
            steps:
              two: { uses: test.fail, with: { kind: permanent, message: boom } }
            """, name: "breaks.yaml")])
        let failed = try #require(try h.runIDs().first { $0 != runID })
        let detached = try h.orchestrate(["retry", failed, "--detach"])
        #expect(detached.status == 0, "\(detached.stderr)")
        #expect(try h.status(failed)["status"]?.stringValue == "queued")
    }
}
