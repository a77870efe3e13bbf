import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// `on.watch` with one run per file, through two real `serve --watch` processes on one store
/// at once (one on inotify, one scanning only): every settled file that passes the filters
/// becomes exactly one run, with inputs templated from the file; `after: delete` removes
/// exactly the files whose run succeeded; a restart hands nothing over again, and a file
/// replaced with new content is new work. Runs on PostgreSQL too (ORCHESTRATE_TEST_STORE).
@Suite(.serialized) struct WatchFolderRunTests {
    let h = Harness()
    var outbox: String { h.path("outbox") }
    var out: String { h.path("out") }

    func workflow() -> String {
        h.workflow("""
            version: 1
            name: outbox-runs
            inputs:
              source: { type: path, required: true }
              relative: { type: string, required: true }
              size: { type: integer, required: true }
            defaults:
              retry: { max_attempts: 1 }
            on:
              watch:
                path: outbox
                recursive: true
                include: ["*.txt", "*.TXT"]
                exclude: "skip-*"
                settle: 1s
                inputs: { source: "${{ file.path }}", relative: "${{ file.relative }}", size: "${{ file.size }}" }
                after: delete
            steps:
              copy:
                uses: exec
                with:
                  command:
                    - sh
                    - -c
                    - 'case "$1" in *bad*) exit 3;; esac; mkdir -p "$(dirname "$2")" && cp "$1" "$2"'
                    - sh
                    - "${{ inputs.source }}"
                    - "\(out)/${{ inputs.relative }}"
            """, name: "outbox-runs.yaml")
    }

    func serve(_ workflow: String, poll: Bool) throws -> StartedProcess {
        try h.start(["serve", "--watch", workflow, "--max-parallel", "4"] + (poll ? ["--watch-poll"] : []))
    }

    func stop(_ process: StartedProcess) {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
    }

    func write(_ relative: String, _ text: String) {
        let path = outbox + "/" + relative
        try? FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)), "could not write \(path)")
    }

    func finishedRuns() throws -> [JSONValue] {
        Harness.events(try h.orchestrate(["list", "--json"])).filter {
            ["succeeded", "failed"].contains($0["status"]?.stringValue ?? "")
        }
    }

    @Test func eachSettledFileBecomesOneRunAcrossTwoServesAndARestart() throws {
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        let wf = workflow()
        // Files already there before anything watches are picked up at start.
        write("early.txt", "early")
        let inotify = try serve(wf, poll: false)
        defer { if inotify.isRunning { stop(inotify) } }
        let scanning = try serve(wf, poll: true)
        defer { if scanning.isRunning { stop(scanning) } }

        var good: [String: String] = ["early.txt": "early"]
        for i in 0..<24 {
            let relative = ["", "a/", "a/b/"][i % 3] + "file-\(i).txt"
            good[relative] = "content \(i) " + String(repeating: "x", count: i * 10)
        }
        good["UPPER.TXT"] = "upper"
        for (relative, text) in good where relative != "early.txt" { write(relative, text) }
        let bad = ["bad-1.txt", "a/bad-2.txt"]
        for relative in bad { write(relative, "will fail") }
        // Not picked: excluded, hidden, not included.
        let ignored = ["skip-me.txt", ".hidden.txt", "a/.partial/x.txt", "notes.dat"]
        for relative in ignored { write(relative, "ignored") }

        let expected = good.count + bad.count
        #expect(h.waitFor(60) { ((try? finishedRuns()) ?? []).count >= expected }, "\((try? finishedRuns())?.count ?? 0) runs finished")
        let store = try h.openStore()
        // The watch's identity: this node, the workflow's name, the folder.
        let watch = try h.storeSQL("SELECT DISTINCT watch FROM watch_handoffs")
        #expect(watch.hasSuffix(":outbox-runs:\(outbox)"), "\(watch)")
        #expect(h.waitFor(10) { (try? store.watchHandOffs(watch: watch, pendingOnly: true))?.isEmpty == true })

        // Exactly one run per file, its inputs templated from the file.
        let runs = try store.listRuns(RunFilter())
        #expect(runs.count == expected, "\(runs.map { $0.inputs.jsonText })")
        let relatives = runs.compactMap { $0.inputs["relative"]?.stringValue }
        #expect(Set(relatives) == Set(good.keys).union(bad), "\(relatives.sorted())")
        #expect(relatives.count == Set(relatives).count)
        for run in runs {
            let relative = run.inputs["relative"]?.stringValue ?? ""
            #expect(run.inputs["source"]?.stringValue == outbox + "/" + relative)
            #expect(run.inputs["size"]?.intValue == Int64((good[relative] ?? "will fail").utf8.count))
            #expect(run.status == (bad.contains(relative) ? .failed : .succeeded), "\(relative): \(run.status)")
        }
        // The copies are whole; `after: delete` removed exactly the succeeded ones.
        for (relative, text) in good {
            #expect((try? String(contentsOfFile: out + "/" + relative, encoding: .utf8)) == text, "\(relative)")
            #expect(!FileManager.default.fileExists(atPath: outbox + "/" + relative), "\(relative) not deleted")
        }
        for relative in bad + ignored { #expect(FileManager.default.fileExists(atPath: outbox + "/" + relative), "\(relative)") }
        let outcomes = try store.watchHandOffs(watch: watch, pendingOnly: false).map(\.outcome)
        // `removed` from the serve that deleted it; `done` when the other serve, finding the file
        // gone at two looks a second apart, recorded first (the deleting one stalled between its
        // delete and its record: seen once on a loaded machine).
        #expect(outcomes.filter { $0 == .removed || $0 == .done }.count == good.count)
        #expect(outcomes.contains(.removed))
        #expect(outcomes.filter { $0 == .left }.count == bad.count)

        // A restart hands nothing over again (the failed files are still there, unchanged)...
        stop(inotify)
        stop(scanning)
        let again = try serve(wf, poll: true)  // scanning alone from here on
        defer { if again.isRunning { stop(again) } }
        Thread.sleep(forTimeInterval: 3)
        #expect(try store.listRuns(RunFilter()).count == expected)
        // ...but a file replaced with new content is new work.
        write("bad-1.txt", "fixed now, still named bad")
        #expect(h.waitFor(20) { ((try? store.listRuns(RunFilter()).count) ?? 0) == expected + 1 })

        // Once its run is pruned, a file the watch deleted is forgotten: the same bytes dropped
        // in again with the same mtime (a re-delivery by `rsync -t` after the retention) are new
        // work. A failed file's hand-off stays with the file, its run pruned or not.
        // A file whose hand-off the deleting serve recorded (`removed`), put back the same.
        let putBack = try #require(try store.watchHandOffs(watch: watch, pendingOnly: false).first { $0.outcome == .removed }?.file.path)
        let putBackMtime = try #require(Int64(try h.storeSQL("SELECT mtime_ns FROM watch_handoffs WHERE path = '\(putBack)'")))
        let pruned = try h.orchestrate(["prune", "--older-than", "1s"])
        #expect(pruned.status == 0, "\(pruned.stderr)")
        #expect(try h.storeSQL("SELECT count(*) FROM watch_handoffs WHERE path = '\(putBack)'") == "0")
        #expect(try h.storeSQL("SELECT outcome FROM watch_handoffs WHERE path = 'a/bad-2.txt'") == "left")
        #expect(try store.run(runs.first { $0.inputs["relative"]?.stringValue == "a/bad-2.txt" }?.id ?? "") == nil)
        write(putBack, good[putBack] ?? "")
        var times = [timespec(tv_sec: Int(putBackMtime / 1_000_000_000), tv_nsec: Int(putBackMtime % 1_000_000_000))]
        times.append(times[0])
        #expect(utimensat(AT_FDCWD, outbox + "/" + putBack, times, 0) == 0)
        #expect(h.waitFor(20) {
            ((try? store.listRuns(RunFilter())) ?? []).contains { $0.inputs["relative"]?.stringValue == putBack }
        }, "the same version of \(putBack) was not handed over again after its run was pruned")
        #expect(try h.storeSQL("SELECT mtime_ns FROM watch_handoffs WHERE path = '\(putBack)'") == String(putBackMtime))
    }

    @Test func serveRefusesWatchesItCannotKeep() throws {
        // A workflow without on.watch.
        let plain = h.workflow("name: plain\nsteps:\n  a: { uses: exec, with: { command: [\"true\"] } }\n", name: "plain.yaml")
        let none = try h.orchestrate(["serve", "--watch", plain])
        #expect(none.status == 2)
        #expect(none.stderr.contains("has no on.watch"), "\(none.stderr)")
        // A folder that is not there: named, at the watch's place in the file.
        let missing = h.workflow("""
            name: missing
            on:
              watch: { path: no-such-folder, inputs: {} }
            steps:
              a: { uses: exec, with: { command: ["true"] } }
            """, name: "missing.yaml")
        let result = try h.orchestrate(["serve", "--watch", missing])
        #expect(result.status == 2)
        #expect(result.stderr.contains("\(missing):3:3: on.watch path \(h.path("no-such-folder")) is not a folder"), "\(result.stderr)")
        // A bad on.watch is a workflow error, reported before anything runs.
        let bad = h.workflow("name: bad\non:\n  watch: { path: /tmp, settle: soon }\nsteps:\n  a: { uses: exec, with: { command: [\"true\"] } }\n",
                             name: "bad.yaml")
        let invalid = try h.orchestrate(["serve", "--watch", bad])
        #expect(invalid.status == 2)
        #expect(invalid.stderr.contains("\(bad):3:32: error: invalid duration 'soon' for 'settle'"), "\(invalid.stderr)")
    }
}
