import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// Retention on the real binary: `orchestrate prune` by hand (what goes, what stays, --dry-run,
/// --status, a follower resuming from a pruned seq) and `serve`'s pruner with the store's and a
/// workflow's own period. On PostgreSQL too with ORCHESTRATE_TEST_STORE=postgres.
@Suite(.serialized) struct RetentionTests {
    let h = Harness()

    /// A workflow that writes a file into its run directory, or fails when `fails`.
    func workflow(_ name: String, fails: Bool = false, retention: String? = nil) -> String {
        h.workflow("""
            version: 1
            name: \(name)
            \(retention.map { "retention: \($0)" } ?? "")
            steps:
              write:
                uses: test.append
                with: { file: "${{ run.dir }}/out.txt", line: "hello" }
            \(fails ? "  fail: { uses: test.fail, needs: [write], with: { kind: permanent, message: no } }" : "")
            """, name: name + ".yaml")
    }

    /// Runs `file` in the foreground and returns the run's id.
    func run(_ file: String) throws -> String {
        let result = try h.orchestrate(["run", file, "--json"])
        return try #require(Harness.events(result).first?["run"]?.stringValue, "\(result.stderr)")
    }

    func runDirectory(_ id: String) -> String { h.state + "/runs/" + id }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    @Test func pruneRemovesFinishedRunsWithTheirDirectoriesAndNothingElse() throws {
        let ok = workflow("ok"), bad = workflow("bad", fails: true)
        let first = try run(ok), second = try run(ok), failed = try run(bad)
        let queued = try h.orchestrate(["submit", ok]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        for id in [first, second, failed] { #expect(exists(runDirectory(id) + "/out.txt"), "\(id)") }
        let firstSeq = try #require(Harness.events(try h.orchestrate(["events", first])).first?["seq"]?.intValue)
        Thread.sleep(forTimeInterval: 1.2)

        // --dry-run lists the finished runs and changes nothing.
        let dry = try h.orchestrate(["prune", "--older-than", "1s", "--dry-run"])
        #expect(dry.status == 0, "\(dry.stderr)")
        for id in [first, second, failed] { #expect(dry.stdout.contains("would prune \(id)")) }
        #expect(!dry.stdout.contains(queued))
        #expect(Set(try h.runIDs()) == [first, second, failed, queued])
        #expect(exists(runDirectory(first)))

        // A period none of them is past yet: nothing.
        #expect(try h.orchestrate(["prune", "--older-than", "1h"]).stdout.contains("pruned 0 finished run"))

        // --status: only the failed one.
        let onlyFailed = try h.orchestrate(["prune", "--older-than", "1s", "--status", "failed"])
        #expect(onlyFailed.status == 0, "\(onlyFailed.stderr)")
        #expect(Set(try h.runIDs()) == [first, second, queued])
        #expect(!exists(runDirectory(failed)) && exists(runDirectory(first)))

        // The rest of the finished runs; the queued one stays, however old.
        let all = try h.orchestrate(["prune", "--older-than", "1s", "--json"])
        let report = try JSONValue(parsing: all.stdout)
        #expect(Set(report["runs"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []) == [first, second])
        #expect(report["directories_removed"]?.intValue == 2)
        #expect(try h.runIDs() == [queued])
        #expect(!exists(runDirectory(first)) && !exists(runDirectory(second)))
        #expect(try h.orchestrate(["status", first]).status != 0)

        // Unknown statuses, unfinished ones and bad periods are usage errors.
        #expect(try h.orchestrate(["prune", "--older-than", "1s", "--status", "queued"]).status == 2)
        #expect(try h.orchestrate(["prune", "--older-than", "30 days"]).status == 2)

        // A follower resuming from a pruned seq is told, and reads the runs.pruned events.
        let resumed = try h.orchestrate(["events", "--after", "\(firstSeq)"])
        #expect(resumed.status == 0)
        #expect(resumed.stderr.contains("pruned by retention, up to seq"), "\(resumed.stderr)")
        let notices = Harness.events(resumed).ofType("runs.pruned")
        #expect(Set(notices.flatMap { $0["data"]?["runs"]?.arrayValue?.compactMap(\.stringValue) ?? [] }) == [first, second, failed])
        #expect(Harness.events(resumed).allSatisfy { $0["run"]?.stringValue != first })
        // From the start, or from past the pruned seqs, no warning.
        #expect(!(try h.orchestrate(["events"]).stderr.contains("pruned")))
        // A pruned run followed by id: a clear end, not a wait for ever.
        let gone = try h.orchestrate(["events", first, "--follow"])
        #expect(gone.status == 1 && gone.stderr.contains("is gone"), "\(gone.stderr)")
    }

    @Test func serveprunesPastTheStoresRetentionAndKeepsWhatAWorkflowKeeps() throws {
        let plain = try run(workflow("plain"))
        let kept = try run(workflow("kept", retention: "off"))
        let set = try h.orchestrate(["queue", "retention", "1s"])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(try h.orchestrate(["queue", "retention"]).stdout.contains("retention 1s"))
        let serve = try h.start(["serve"], environment: ["ORCHESTRATE_PRUNE_INTERVAL": "0.3"])
        defer {
            kill(serve.processIdentifier, SIGTERM)
            serve.waitUntilExit()
        }
        #expect(h.waitFor { (try? h.runIDs()) == [kept] })
        #expect(!exists(runDirectory(plain)))
        #expect(exists(runDirectory(kept) + "/out.txt"))
    }
}
