import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// `kill -9` of the process that runs an exec step takes the step's whole process group with
/// it (the command's child included: `sh -c 'sleep; echo'`), within a second; the resumed run
/// then has each step's effect exactly once. Through the real binary, for `run` (in process and
/// with `isolation: process`) and `serve`, and for the case where the exec guard is killed too.
@Suite(.serialized) struct KilledEngineExecTests {
    let h = Harness()

    /// Five exec steps in a chain, each `sh -c 'sleep S; echo sN >> log'` (the sleep is the
    /// grandchild: sh forks it); step `slow` sleeps `slowSeconds` instead.
    func chain(slow: String = "s3", slowSeconds: Double = 0.7, isolation: String? = nil) -> String {
        let log = h.path("log")
        let steps = (1...5).map { n in
            let id = "s\(n)", sleep = id == slow ? slowSeconds : 0.7
            let needs = n == 1 ? "" : "needs: [s\(n - 1)], "
            let isolated = isolation.map { "isolation: \($0), " } ?? ""
            return "  \(id): { uses: exec, \(needs)\(isolated)with: { command: [sh, -c, \"sleep \(sleep); echo \(id) >> \(log)\"] } }"
        }
        return h.workflow("version: 1\nname: exec-chain\nsteps:\n" + steps.joined(separator: "\n") + "\n")
    }

    /// The process group the exec plugin journaled for `step` (its checkpoint), once there is one;
    /// read from the store behind the engine's back, as another process would (either store).
    func journaledGroup(_ step: String) -> Int32? {
        guard let store = try? h.openStore(), let run = try? store.listRuns(RunFilter()).first,
              let data = try? store.checkpoint(runID: run.id, stepID: step),
              let json = try? JSONValue(parsing: String(decoding: data, as: UTF8.self))
        else { return nil }
        return json["exec_process_group"]?["pgid"]?.intValue.map { Int32($0) }
    }

    /// Waits for `step`'s command to be running (its group journaled, the sleep started), kills
    /// `process` with SIGKILL, and checks that every process of the step's group is gone within
    /// a second. Returns the group.
    @discardableResult
    func killMidStep(_ process: StartedProcess, step: String, alsoKillGuard: Bool = false) throws -> Int32 {
        var group: Int32?
        #expect(h.waitFor {
            group = journaledGroup(step)
            return group.map { LiveProcesses.inGroup($0).contains { $0.command == "sleep" } } ?? false
        }, "\(step) never started its sleep")
        let pgid = try #require(group)
        let before = LiveProcesses.inGroup(pgid)
        #expect(before.count >= 3, "the guard, sh and sleep: \(before)")
        // The guard (it leads the group) first: orchestrate's death would make it end the group.
        if alsoKillGuard { kill(pgid, SIGKILL) }
        kill(process.processIdentifier, SIGKILL)
        let killedAt = Date()
        process.waitUntilExit()
        if alsoKillGuard { return pgid }
        #expect(h.waitFor(1) { LiveProcesses.inGroup(pgid).isEmpty },
                "1 s after the kill, process group \(pgid) still holds \(LiveProcesses.inGroup(pgid))")
        #expect(Date().timeIntervalSince(killedAt) < 1.2)
        return pgid
    }

    @Test(arguments: [nil, "process"])
    func runKilledMidStepLeavesNoProcessAndResumesEachEffectOnce(isolation: String?) throws {
        let file = chain(isolation: isolation)
        let process = try h.start(["run", file])
        try killMidStep(process, step: "s3")
        // Longer than the step's sleep: an orphaned sh would have appended s3 by now.
        Thread.sleep(forTimeInterval: 1)
        #expect(h.lines("log") == ["s1", "s2"])

        let runID = try #require(try h.runIDs().first)
        let resumed = try h.orchestrate(["resume", runID])
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        #expect(h.lines("log") == ["s1", "s2", "s3", "s4", "s5"])
    }

    @Test func serveKilledMidStepLeavesNoProcessAndTheNextServeFinishesEachEffectOnce() throws {
        let submitted = try h.orchestrate(["submit", chain(), "--id", "chain"])
        #expect(submitted.status == 0, "\(submitted.stderr)")
        let worker = try h.start(["serve"])
        try killMidStep(worker, step: "s2")
        Thread.sleep(forTimeInterval: 1)
        #expect(h.lines("log") == ["s1"])

        let next = try h.start(["serve"])
        defer {
            kill(next.processIdentifier, SIGTERM)
            next.waitUntilExit()
        }
        #expect(h.waitFor(30) { (try? h.status("chain")["status"]?.stringValue) == "succeeded" })
        #expect(h.lines("log") == ["s1", "s2", "s3", "s4", "s5"])
    }

    /// kill -9 of orchestrate and of the guard: the command is orphaned (nothing watches it any
    /// more), so the resumed attempt first kills what is left of the group it journaled.
    @Test func aResumedStepFirstEndsWhatItsKilledAttemptLeftRunning() throws {
        let file = chain(slow: "s2", slowSeconds: 4)
        let process = try h.start(["run", file])
        let group = try killMidStep(process, step: "s2", alsoKillGuard: true)
        Thread.sleep(forTimeInterval: 0.3)
        let orphans = LiveProcesses.inGroup(group)
        #expect(orphans.map(\.command).sorted() == ["sh", "sleep"], "the orphaned command is still running: \(orphans)")

        let runID = try #require(try h.runIDs().first)
        let resumed = try h.orchestrate(["resume", runID, "--json"])
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        #expect(orphans.allSatisfy { !LiveProcesses.isLive($0.pid) })
        // The orphan would have appended s2 during the resumed attempt's 4 s sleep.
        #expect(h.lines("log") == ["s1", "s2", "s3", "s4", "s5"])
        let warnings = Harness.events(resumed).ofType("step.log").compactMap { $0["data"]?["message"]?.stringValue }
        #expect(warnings.contains { $0.hasPrefix("the previous attempt left 2 process(es) running in process group \(group)") },
                "\(warnings)")
    }

    /// An install without `orchestrate-exec-guard` next to the exec plugin: the step fails at
    /// once, permanently, naming the missing file (never runs the command unguarded).
    @Test func aMissingGuardFailsTheStepNamingTheFile() throws {
        let bin = h.dir.file("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        for name in ["orchestrate", "liborchestrate-plugin-exec.so"] {
            try FileManager.default.copyItem(at: TestPaths.productsDir.appendingPathComponent(name), to: bin.appendingPathComponent(name))
        }
        let file = h.workflow("""
            version: 1
            name: unguarded
            steps:
              one: { uses: exec, with: { command: [sh, -c, "echo ran >> \(h.path("log"))"] } }
            """)
        let result = try ChildProcess.run(bin.appendingPathComponent("orchestrate"), ["run", file, "--state", h.state, "--json"])
        #expect(result.status == 1)
        let failed = try #require(Harness.events(result).ofType("step.failed").first, "\(result.stdout)")
        let message = failed["data"]?["error"]?.stringValue ?? failed.jsonText
        let guardPath = bin.resolvingSymlinksInPath().appendingPathComponent("orchestrate-exec-guard").path
        #expect(message.contains("process guard \(guardPath) is missing"), "\(message)")
        #expect(failed["data"]?["code"]?.stringValue == "guard_missing", "\(failed.jsonText)")
        #expect(failed["data"]?["kind"]?.stringValue == "permanent", "\(failed.jsonText)")
        #expect(h.lines("log").isEmpty)
    }
}

/// Live (not zombie) processes read from /proc.
enum LiveProcesses {
    struct Entry: CustomStringConvertible {
        let pid: Int32
        let command: String
        var description: String { "\(pid) \(command)" }
    }

    static func inGroup(_ group: Int32) -> [Entry] {
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.compactMap { Int32($0) } ?? []
        return pids.compactMap { pid in
            guard let fields = stat(pid), fields.group == group, fields.state != "Z", fields.state != "X" else { return nil }
            return Entry(pid: pid, command: fields.command)
        }
    }

    static func isLive(_ pid: Int32) -> Bool {
        guard let fields = stat(pid) else { return false }
        return fields.state != "Z" && fields.state != "X"
    }

    private static func stat(_ pid: Int32) -> (command: String, state: Character, group: Int32)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 2, let state = fields[0].first, let group = Int32(fields[2]) else { return nil }
        return (String(text[text.index(after: open)..<close]), state, group)
    }
}
