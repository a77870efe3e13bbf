import Foundation
import OrchestrateJSON
import OrchestrateTestSupport

/// One PostgreSQL store shared by workers on several machines (network namespaces of a
/// `VirtualLAN`): a dedicated PostgreSQL cluster listening on the LAN's host address, a database
/// of the test's own, the C test plugin, and per-machine state directories. Workers reach the
/// store at the host address; the test's own commands (submit, status) and SQL checks use
/// 127.0.0.1. `shutdown()` (in a defer) stops the workers, the namespaces and PostgreSQL.
final class Cluster: @unchecked Sendable {
    let lan: VirtualLAN
    let postgres: PostgresServer
    let dir = TemporaryDirectory("cluster")
    /// The database's name, its URL from the host and its URL from the machines.
    let database: String
    let localURL: String
    let lanURL: String
    private(set) var workers: [Int: SpawnedChild] = [:]

    /// The test plugin (Tests/Fixtures/plugins/teststeps.c), built once per test process.
    static let pluginDir: String = {
        let out = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("orchestrate-cluster-fixtures-\(getpid())")
        try! FileManager.default.createDirectory(at: out, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        _ = try! CCompiler.buildFixture("teststeps", into: out)
        return out.path
    }()

    init(machines: Int) throws {
        try VirtualLAN.requireSupport()
        lan = try VirtualLAN(machines: machines)
        do {
            postgres = try PostgresServer.dedicated(alsoListeningOn: lan.hostAddress, trusting: lan.network)
        } catch {
            lan.remove()
            throw error
        }
        localURL = try postgres.createDatabase(prefix: "cluster")
        database = String(localURL.split(separator: "/").last!)
        lanURL = postgres.url(database, host: lan.hostAddress)
    }

    /// `orchestrate serve` on machine `index` as node `n<index>`, with its own state directory.
    @discardableResult
    func startWorker(on index: Int, queue: String = "default", arguments: [String] = [],
                     environment: [String: String] = [:]) throws -> SpawnedChild
    {
        let state = dir.file("node\(index)").path
        let command = lan.command(on: index, [TestPaths.orchestrate.path, "serve", "--queue", queue,
                                              "--store", lanURL, "--node", "n\(index)", "--state", state,
                                              "--plugin-path", Cluster.pluginDir] + arguments)
        let worker = try SpawnedChild(command, stdout: log(index, "out"), stderr: log(index, "err"), environment: environment)
        workers[index] = worker
        return worker
    }

    func log(_ index: Int, _ kind: String) -> String { dir.file("worker\(index).\(kind)").path }

    /// The last lines every worker wrote to stderr, for failure messages.
    var workerLogs: String {
        workers.keys.sorted().map { index in
            let text = (try? String(contentsOfFile: log(index, "err"), encoding: .utf8)) ?? ""
            return "worker n\(index) stderr:\n" + text.split(separator: "\n").suffix(15).joined(separator: "\n")
        }.joined(separator: "\n")
    }

    /// Runs `orchestrate` from the host against the store.
    @discardableResult
    func orchestrate(_ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
        try ChildProcess.orchestrate(arguments + ["--store", localURL, "--state", dir.file("host").path,
                                                  "--plugin-path", Cluster.pluginDir],
                                     environment: environment)
    }

    /// Submits a run and returns its id.
    func submit(_ workflow: String, queue: String = "default", inputs: [String: String] = [:], id: String? = nil) throws -> String {
        var arguments = ["submit", workflow, "--queue", queue, "--json"]
        for (name, value) in inputs.sorted(by: { $0.key < $1.key }) { arguments += ["--input", "\(name)=\(value)"] }
        if let id { arguments += ["--id", id] }
        let result = try orchestrate(arguments)
        guard result.status == 0 else { throw TestFailure("submit failed (\(result.status)): \(result.stderr)") }
        if let id { return id }
        let line = result.stdout.split(separator: "\n").compactMap { try? JSONValue(parsing: String($0)) }.first
        guard let runID = line?["id"]?.stringValue else {
            throw TestFailure("submit printed no run id: \(result.stdout)")
        }
        return runID
    }

    /// Submits `count` runs at once (`submit --batch`, each line's inputs over `inputs`) and
    /// returns their ids.
    func submitBatch(_ workflow: String, count: Int, queue: String = "default", inputs: [String: String] = [:]) throws -> [String] {
        let batch = dir.write("batch-\(UUID().uuidString.prefix(6)).jsonl", String(repeating: "{}\n", count: count)).path
        var arguments = ["submit", workflow, "--queue", queue, "--json", "--batch", batch]
        for (name, value) in inputs.sorted(by: { $0.key < $1.key }) { arguments += ["--input", "\(name)=\(value)"] }
        let result = try orchestrate(arguments)
        guard result.status == 0 else { throw TestFailure("submit --batch failed (\(result.status)): \(result.stderr)") }
        return result.stdout.split(separator: "\n").compactMap { try? JSONValue(parsing: String($0)) }.compactMap { $0["id"]?.stringValue }
    }

    /// Rows of a query against the store's database (columns split on '|').
    func rows(_ query: String) throws -> [[String]] {
        let text = try postgres.sql(query, database: database)
        return text.isEmpty ? [] : text.split(separator: "\n").map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
    }

    func scalar(_ query: String) throws -> String { try rows(query).first?.first ?? "" }

    /// The database server's clock, seconds since 1970 (the clock leases are judged by).
    func databaseNow() throws -> Double { Double(try scalar("SELECT extract(epoch FROM clock_timestamp())")) ?? 0 }

    /// Run counts by status.
    func runStatuses() throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try rows("SELECT status, count(*) FROM runs GROUP BY status") { counts[row[0]] = Int(row[1]) ?? 0 }
        return counts
    }

    /// Polls `condition` every 100 ms until it holds or `timeout` seconds pass; a condition that
    /// throws (the schema not created yet by the first worker, say) counts as not holding.
    func waitUntil(_ timeout: Double, _ condition: () throws -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? condition()) == true { return true }
            Thread.sleep(forTimeInterval: 0.1)
        }
        return (try? condition()) == true
    }

    /// Stops the workers (SIGTERM, then SIGKILL with the namespaces), removes the LAN, stops
    /// and deletes PostgreSQL.
    func shutdown() {
        for worker in workers.values { kill(worker.pid, SIGTERM) }
        for worker in workers.values { _ = worker.wait(timeout: 5) }
        lan.remove()
        postgres.stop()
        postgres.remove()
    }
}
