import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `serve` and `run` outlive their output: a log on a disk that fills (`serve >log 2>&1`,
/// here /dev/full) or a pipe whose reader died (`serve | logger`, here a FIFO closed by the
/// test) loses lines, never the server nor the runs in flight. A command whose output is its
/// purpose (`list`) stops with a clear error instead of trapping.
@Suite(.serialized) struct UnwritableOutputTests {
    let h = Harness()

    func workflow() -> String {
        h.workflow("""
            version: 1
            name: quiet
            steps:
              first: { uses: test.sleep, with: { ms: 200 } }
              second: { uses: test.noop, needs: [first] }
            """)
    }

    func serve(stdout: String, stderr: String) throws -> SpawnedChild {
        try SpawnedChild([TestPaths.orchestrate.path, "serve", "--max-parallel", "2"] + h.baseArguments, stdout: stdout, stderr: stderr)
    }

    func submitAndWait(_ file: String, _ id: String) throws {
        #expect(try h.orchestrate(["submit", file, "--id", id]).status == 0)
        #expect(h.waitFor(30) { (try? h.status(id)["status"]?.stringValue) == "succeeded" }, "run \(id) did not succeed")
    }

    @Test func serveWritingToAFullDiskKeepsServing() throws {
        let worker = try serve(stdout: "/dev/full", stderr: "/dev/full")
        defer { kill(worker.pid, SIGKILL); _ = worker.wait(timeout: 10) }
        let file = workflow()
        try submitAndWait(file, "full1")
        try submitAndWait(file, "full2")
        #expect(worker.poll() == nil, "serve ended with status \(worker.poll() ?? 0)")
        kill(worker.pid, SIGTERM)
        #expect(worker.wait(timeout: 20) == 0, "serve stops cleanly on SIGTERM")
    }

    @Test func serveWhoseLogReaderDiedKeepsServing() throws {
        let fifo = h.path("log.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        // The reader first (the writer's open would wait for one), non-blocking for the test.
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        let worker = try serve(stdout: fifo, stderr: fifo)
        defer { kill(worker.pid, SIGKILL); _ = worker.wait(timeout: 10) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        #expect(h.waitFor(20) { read(reader, &buffer, buffer.count) > 0 }, "serve wrote its first line")
        close(reader)  // `| logger` died
        let file = workflow()
        try submitAndWait(file, "pipe1")
        try submitAndWait(file, "pipe2")
        #expect(worker.poll() == nil, "serve ended with status \(worker.poll() ?? 0)")
    }

    @Test func runWhoseOutputReaderDiedFinishesItsRun() throws {
        let fifo = h.path("run.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        let file = h.workflow("""
            version: 1
            name: long
            steps:
              first: { uses: test.noop }
              slow: { uses: test.sleep, needs: [first], with: { ms: 1500 } }
              last: { uses: test.noop, needs: [slow] }
            """)
        let run = try SpawnedChild([TestPaths.orchestrate.path, "run", file, "--id", "piped"] + h.baseArguments,
                                   stdout: fifo, stderr: h.path("run.stderr"))
        var buffer = [UInt8](repeating: 0, count: 4096)
        #expect(h.waitFor(20) { read(reader, &buffer, buffer.count) > 0 })
        close(reader)
        #expect(run.wait(timeout: 30) == 0, "\(h.lines("run.stderr"))")
        #expect(try h.status("piped")["status"]?.stringValue == "succeeded")
    }

    @Test func listToAFullDiskSaysSoAndFails() throws {
        #expect(try h.orchestrate(["run", h.workflow("version: 1\nname: one\nsteps:\n  a: { uses: test.noop }\n")]).status == 0)
        let list = try SpawnedChild([TestPaths.orchestrate.path, "list"] + h.baseArguments, stdout: "/dev/full", stderr: h.path("list.stderr"))
        #expect(list.wait(timeout: 20) == 1)
        #expect(h.lines("list.stderr").contains { $0.contains("cannot write the output: No space left on device") }, "\(h.lines("list.stderr"))")
    }
}
