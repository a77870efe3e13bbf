import Foundation
import OrchestrateExactPath
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// A watched file whose name starts with a combining mark, below a folder (`sub/\u{301}x.txt`):
/// Foundation's path functions go by characters, and "/" followed by a combining mark is one
/// character that is not "/". The run's `file.name` is the name alone and `file.dir` its folder
/// (both cut at the "/" byte), and `after: move-to` keeps the relative path.
@Suite(.serialized) struct WatchCombiningNameTests {
    let h = Harness()

    @Test func aNameStartingWithACombiningMarkIsCutAtItsSlash() throws {
        let outbox = h.path("outbox"), done = h.path("done")
        try FileManager.default.createDirectory(atPath: outbox + "/sub", withIntermediateDirectories: true)
        let name = "\u{301}x.txt"
        // By its bytes (POSIX: no layer that might normalize the name).
        let fd = open(outbox + "/sub/" + name, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        try #require(fd >= 0)
        #expect(write(fd, "hello", 5) == 5)
        close(fd)
        let wf = h.workflow("""
            version: 1
            name: combining
            inputs:
              name: { type: string, required: true }
              dir: { type: string, required: true }
            on:
              watch:
                path: outbox
                recursive: true
                settle: 200ms
                inputs: { name: "${{ file.name }}", dir: "${{ file.dir }}" }
                after: move-to ../done
            steps:
              noop:
                uses: exec
                with: { command: ["true"] }
            """, name: "combining.yaml")
        let serve = try h.start(["serve", "--watch", wf, "--watch-poll"])
        defer {
            kill(serve.processIdentifier, SIGTERM)
            serve.waitUntilExit()
        }
        let moved = done + "/sub/" + name
        #expect(h.waitFor(30) { FileManager.default.fileExists(atPath: moved) }, "not moved to \(moved)")
        let runs = try h.openStore().listRuns(RunFilter())
        let run = try #require(runs.first, "no run")
        #expect(runs.count == 1 && run.status == .succeeded, "\(run.status)")
        #expect(ExactPath(run.inputs["name"]?.stringValue ?? "") == ExactPath(name), "\(run.inputs.jsonText)")
        #expect(ExactPath(run.inputs["dir"]?.stringValue ?? "") == ExactPath(outbox + "/sub"), "\(run.inputs.jsonText)")
        #expect(!FileManager.default.fileExists(atPath: outbox + "/sub/" + name))
    }
}
