import Foundation
import OrchestrateTestSupport
import XCTest

/// The database going away: restarted under a running `serve`, or not there at all at start.
final class DatabaseOutageTests: XCTestCase {
    /// PostgreSQL restarted (fast shutdown: every session cut) while a run is in flight: the
    /// worker reconnects, finishes that run, and takes a run submitted after the restart.
    func testServeCarriesOnAcrossAPostgreSQLRestart() throws {
        let postgres = try PostgresServer.dedicated()
        defer { postgres.stop(); postgres.remove() }
        let url = try postgres.createDatabase(prefix: "restart")
        let dir = TemporaryDirectory("pg-restart")
        let log = dir.file("executed.log").path
        let workflow = dir.write("slow.yaml", """
            version: 1
            name: slow
            inputs:
              log: { type: string, required: true }
              ms: { type: integer, default: 3000 }
            steps:
              wait:
                uses: test.sleep
                with: { ms: "${{ inputs.ms }}" }
              record:
                needs: [wait]
                uses: test.append
                with: { file: "${{ inputs.log }}", line: "${{ run.id }}" }
            """).path
        let common = ["--store", url, "--state", dir.file("state").path, "--plugin-path", Cluster.pluginDir]
        let worker = try SpawnedChild([TestPaths.orchestrate.path, "serve", "--node", "solo"] + common,
                                      stdout: dir.file("serve.out").path, stderr: dir.file("serve.err").path)
        defer { kill(worker.pid, SIGKILL); _ = worker.wait(timeout: 5) }
        func serveLog() -> String { (try? String(contentsOfFile: dir.file("serve.err").path, encoding: .utf8)) ?? "" }
        func sql(_ query: String) -> String { (try? postgres.sql(query, database: String(url.split(separator: "/").last!))) ?? "" }
        func submit(_ id: String, ms: Int) throws {
            let result = try ChildProcess.orchestrate(["submit", workflow, "--id", id, "--input", "log=\(log)", "--input", "ms=\(ms)"] + common)
            XCTAssertEqual(result.status, 0, result.stderr)
        }

        try submit("before", ms: 3000)
        XCTAssertTrue(Tools.waitFor(20) { sql("SELECT status FROM steps WHERE run_id = 'before' AND step = 'wait'") == "running" },
                      "the first run should start\n\(serveLog())")
        postgres.stop()
        Thread.sleep(forTimeInterval: 1)
        try postgres.start()
        try submit("after", ms: 10)

        let done = Tools.waitFor(60) { sql("SELECT count(*) FROM runs WHERE status = 'succeeded'") == "2" }
        XCTAssertTrue(done, "both runs should succeed after the restart: \(sql("SELECT id, status, error FROM runs"))\n\(serveLog())")
        XCTAssertNil(worker.poll(), "serve should still be running\n\(serveLog())")
        let executed = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        XCTAssertEqual(executed.sorted(), ["after", "before"], "each run's last step executed once")
    }

    /// A paused run this node holds (it keeps a slot) taken by another node, as after an outage
    /// longer than the lease: the node lets it go at its next renewal and the slot serves the
    /// queue again. It used to keep the run, and the slot, for ever.
    func testAHeldPausedRunTakenByAnotherNodeFreesItsSlot() throws {
        let postgres = try PostgresServer.dedicated()
        defer { postgres.stop(); postgres.remove() }
        let url = try postgres.createDatabase(prefix: "held")
        let database = String(url.split(separator: "/").last!)
        let dir = TemporaryDirectory("pg-held")
        let workflow = dir.write("wait.yaml", """
            version: 1
            name: wait
            inputs:
              ms: { type: integer, default: 60000 }
            steps:
              wait: { uses: test.sleep, with: { ms: "${{ inputs.ms }}" } }
            """).path
        let common = ["--store", url, "--state", dir.file("state").path, "--plugin-path", Cluster.pluginDir]
        let worker = try SpawnedChild([TestPaths.orchestrate.path, "serve", "--node", "a", "--max-parallel", "1", "--queue", "q", "--queue", "r"] + common,
                                      stdout: dir.file("serve.out").path, stderr: dir.file("serve.err").path)
        defer { kill(worker.pid, SIGKILL); _ = worker.wait(timeout: 5) }
        func serveLog() -> String { (try? String(contentsOfFile: dir.file("serve.err").path, encoding: .utf8)) ?? "" }
        func sql(_ query: String) -> String { (try? postgres.sql(query, database: database)) ?? "" }
        func orchestrate(_ arguments: [String]) throws {
            let result = try ChildProcess.orchestrate(arguments + common)
            XCTAssertEqual(result.status, 0, result.stderr)
        }

        try orchestrate(["submit", workflow, "--id", "held", "--queue", "q"])
        XCTAssertTrue(Tools.waitFor(20) { sql("SELECT status FROM steps WHERE run_id = 'held' AND step = 'wait'") == "running" }, serveLog())
        try orchestrate(["pause", "held"])
        XCTAssertTrue(Tools.waitFor(20) { sql("SELECT status || ' ' || coalesce(owner_node, '-') FROM runs WHERE id = 'held'") == "paused a" },
                      "the paused run is held by node a: \(sql("SELECT status, owner_node FROM runs WHERE id = 'held'"))\n\(serveLog())")
        // Another node claims it with a lease of its own (what claimPausedRuns does once a's lease ran out).
        _ = sql("UPDATE runs SET owner_node = 'b', owner_pid = 1, owner_start = 1, lease_until = extract(epoch from now()) + 3600 WHERE id = 'held'")
        try orchestrate(["submit", workflow, "--id", "next", "--queue", "r", "--input", "ms=10"])
        XCTAssertTrue(Tools.waitFor(30) { sql("SELECT status FROM runs WHERE id = 'next'") == "succeeded" },
                      "node a's one slot should serve the queue again: next is \(sql("SELECT status FROM runs WHERE id = 'next'"))\n\(serveLog())")
        XCTAssertEqual(sql("SELECT owner_node FROM runs WHERE id = 'held'"), "b", "the run stays with the node that took it")
    }

    /// PostgreSQL down while files arrive in a watched folder: the watch says so once (not once
    /// per file per settle period), waits between tries, says when the store answers again, and
    /// then hands every file over exactly once.
    func testAWatchSaysOnceThatTheStoreIsDownAndHandsEverythingOverAfter() throws {
        let postgres = try PostgresServer.dedicated()
        defer { postgres.stop(); postgres.remove() }
        let url = try postgres.createDatabase(prefix: "watchdown")
        let database = String(url.split(separator: "/").last!)
        let dir = TemporaryDirectory("pg-watch-down")
        let inbox = dir.file("inbox").path
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        let workflow = dir.write("watch.yaml", """
            version: 1
            name: watch
            inputs:
              source: { type: path, required: true }
            on:
              watch: { path: "\(inbox)", settle: 500ms, inputs: { source: "${{ file.path }}" } }
            steps:
              look: { uses: test.noop }
            """).path
        let common = ["--store", url, "--state", dir.file("state").path, "--plugin-path", Cluster.pluginDir]
        let worker = try SpawnedChild([TestPaths.orchestrate.path, "serve", "--watch", workflow, "--max-parallel", "4"] + common,
                                      stdout: dir.file("serve.out").path, stderr: dir.file("serve.err").path)
        defer { kill(worker.pid, SIGKILL); _ = worker.wait(timeout: 5) }
        func serveLog() -> String { (try? String(contentsOfFile: dir.file("serve.err").path, encoding: .utf8)) ?? "" }
        func sql(_ query: String) -> String { (try? postgres.sql(query, database: database)) ?? "" }
        try Data("first".utf8).write(to: URL(fileURLWithPath: inbox + "/first.txt"))
        XCTAssertTrue(Tools.waitFor(20) { sql("SELECT count(*) FROM runs WHERE status = 'succeeded'") == "1" }, serveLog())

        postgres.stop()
        for i in 0..<30 { try Data("file \(i)".utf8).write(to: URL(fileURLWithPath: inbox + "/f\(i).txt")) }
        Thread.sleep(forTimeInterval: 8)  // 16 settle periods of 30 files
        func storeWarnings() -> Int { serveLog().split(separator: "\n").filter { $0.contains("watch ") && $0.contains("could not") }.count }
        let during = storeWarnings()
        XCTAssertEqual(during, 1, "one warning for the outage, not one per file per try:\n\(serveLog())")
        try postgres.start()

        XCTAssertTrue(Tools.waitFor(60) { sql("SELECT count(*) FROM runs WHERE status = 'succeeded'") == "31" },
                      "every file handed over once the store answers: \(sql("SELECT count(*) FROM runs"))\n\(serveLog())")
        XCTAssertEqual(sql("SELECT count(DISTINCT inputs_json) FROM runs"), "31", "each file once")
        XCTAssertTrue(serveLog().contains("the state store answers again; hand-overs go on"), serveLog())
        XCTAssertEqual(storeWarnings(), 1, serveLog())
        XCTAssertNil(worker.poll(), "serve should still be running\n\(serveLog())")
    }

    /// A database that is not there at start: serve exits non-zero naming the URL, without its
    /// password, and the password appears nowhere in its output.
    func testUnreachableDatabaseAtStartIsAClearErrorWithoutThePassword() throws {
        let dir = TemporaryDirectory("pg-unreachable")
        let port = Ports.free()
        let worker = try SpawnedChild([TestPaths.orchestrate.path, "serve", "--store", "postgresql://u:secretpw@127.0.0.1:\(port)/x",
                                       "--state", dir.file("state").path],
                                      stdout: dir.file("out").path, stderr: dir.file("err").path)
        let status = worker.wait(timeout: 60)
        let output = ((try? String(contentsOfFile: dir.file("out").path, encoding: .utf8)) ?? "")
            + ((try? String(contentsOfFile: dir.file("err").path, encoding: .utf8)) ?? "")
        XCTAssertNotNil(status, "serve should give up on an unreachable database, not wait forever")
        XCTAssertNotEqual(status ?? 0, 0, output)
        XCTAssertTrue(output.contains("127.0.0.1:\(port)/x"), "the error names the database URL: \(output)")
        XCTAssertFalse(output.contains("secretpw"), "the password must not appear: \(output)")
        XCTAssertTrue(output.lowercased().contains("connect"), "the error says it could not connect: \(output)")
    }
}
