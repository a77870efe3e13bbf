import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport

/// One isolated orchestrate installation for a test: a state directory, a plugin directory with
/// the C test plugin, and helpers to run the real binary against them. With
/// `ORCHESTRATE_TEST_STORE=postgres` (see `EngineTestStore`) its store is a fresh PostgreSQL
/// database instead of the state directory's SQLite file; the state directory still holds the
/// node's run directories.
final class Harness: @unchecked Sendable {
    let dir = TemporaryDirectory("engine")
    var state: String { dir.file("state").path }
    /// The `--store` URL of this harness's own PostgreSQL database, or nil for SQLite.
    let storeURL: String? = EngineTestStore.usesPostgres ? EngineTestStore.freshDatabase() : nil

    /// The test plugin (Tests/Fixtures/plugins/teststeps.c), built once per test process with cc.
    static let pluginDir: String = {
        let out = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("orchestrate-fixtures-\(getpid())")
        try! FileManager.default.createDirectory(at: out, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        _ = try! CCompiler.buildFixture("teststeps", into: out)
        return out.path
    }()

    var baseArguments: [String] { ["--state", state] + storeArguments + ["--plugin-path", Harness.pluginDir] }

    /// The harness's store, opened in this process (another process's view of it).
    func openStore() throws -> any StateStore {
        try StoreOpening.open(storeURL.map { .postgres(connection: $0) } ?? .sqlite(directory: state))
    }

    /// `--store URL` when the store is not the state directory's SQLite file.
    var storeArguments: [String] { storeURL.map { ["--store", $0] } ?? [] }

    /// Writes `yaml` as a workflow file and returns its path.
    func workflow(_ yaml: String, name: String = "wf.yaml") -> String {
        dir.write(name, yaml).path
    }

    func path(_ name: String) -> String { dir.file(name).path }

    func read(_ name: String) -> String { (try? String(contentsOfFile: path(name), encoding: .utf8)) ?? "" }

    func lines(_ name: String) -> [String] { read(name).split(separator: "\n").map(String.init) }

    /// Runs `orchestrate <command> <args> --state … [--store …] --plugin-path …`.
    @discardableResult
    func orchestrate(_ command: [String], environment: [String: String] = [:]) throws -> ProcessResult {
        try ChildProcess.orchestrate(command + baseArguments, environment: environment)
    }

    /// Starts `orchestrate` without waiting (for kill and signal tests).
    /// Starts `orchestrate` in the background (its output discarded), for tests that signal it.
    func start(_ command: [String], environment: [String: String] = [:]) throws -> StartedProcess {
        try StartedProcess([TestPaths.orchestrate.path] + command + baseArguments, environment: environment)
    }

    /// The JSON lines of a `--json` run's stdout.
    static func events(_ result: ProcessResult) -> [JSONValue] {
        result.stdout.split(separator: "\n").compactMap { try? JSONValue(parsing: String($0)) }
    }

    /// The ids of every run in the state store.
    func runIDs() throws -> [String] {
        let result = try orchestrate(["list", "--json"])
        return Harness.events(result).compactMap { $0["id"]?.stringValue }
    }

    func status(_ runID: String) throws -> JSONValue {
        try JSONValue(parsing: try orchestrate(["status", runID, "--json"]).stdout)
    }

    /// Runs SQL on the store's database behind the engine's back (sqlite3 on the state
    /// directory's file, or psql on the PostgreSQL database) and returns its trimmed output.
    func storeSQL(_ statement: String) throws -> String {
        let result = try storeURL.map {
            try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/psql"), ["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", $0, "-c", statement])
        } ?? ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), ["-cmd", ".timeout 5000", state + "/state.sqlite", statement])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The column of `runs` naming the owner's machine: SQLite's schema calls it the host.
    var ownerNodeColumn: String { storeURL == nil ? "owner_host" : "owner_node" }

    /// Polls `condition` every 20 ms for up to `timeout` seconds.
    func waitFor(_ timeout: Double = 20, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return condition()
    }
}

extension [JSONValue] {
    func ofType(_ type: String) -> [JSONValue] { filter { $0["type"]?.stringValue == type } }
}
