import Foundation
import OrchestrateJSON
import OrchestrateTestSupport

/// One isolated orchestrate state directory plus helpers to run the real binary (the sftp plugin
/// is found beside it, in the install's own plugin folder), and test files.
final class Harness: @unchecked Sendable {
    let dir = TemporaryDirectory("sftp")
    var state: String { dir.file("state").path }

    /// Big-file size for the kill/resume tests: `ORCHESTRATE_TEST_BIG_MIB` (default 64).
    static let bigMiB: Int = Int(ProcessInfo.processInfo.environment["ORCHESTRATE_TEST_BIG_MIB"] ?? "") ?? 64

    func path(_ name: String) -> String { dir.file(name).path }

    func workflow(_ yaml: String, name: String = "wf.yaml") -> String { dir.write(name, yaml).path }

    @discardableResult
    func orchestrate(_ command: [String]) throws -> ProcessResult {
        try ChildProcess.orchestrate(command + ["--state", state])
    }

    func start(_ command: [String], log: String = "run.log") throws -> Process {
        let process = Process()
        process.executableURL = TestPaths.orchestrate
        process.arguments = command + ["--state", state]
        try Data().write(to: URL(fileURLWithPath: path(log)))
        process.standardOutput = FileHandle(forWritingAtPath: path(log))
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        return process
    }

    func runIDs() throws -> [String] {
        Harness.events(try orchestrate(["list", "--json"])).compactMap { $0["id"]?.stringValue }
    }

    /// `status --json` with up to 1,000 of the run's session items (status pages them; the
    /// tests here count every one).
    func status(_ runID: String) throws -> JSONValue {
        try JSONValue(parsing: try orchestrate(["status", runID, "--json", "--items", "1000"]).stdout)
    }

    static func events(_ result: ProcessResult) -> [JSONValue] {
        result.stdout.split(separator: "\n").compactMap { try? JSONValue(parsing: String($0)) }
    }

    func waitFor(_ timeout: Double = 60, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return condition()
    }

    /// A file of `size` pseudo-random bytes (deterministic per seed, so not compressible).
    @discardableResult
    static func randomFile(_ path: String, size: Int, seed: UInt64 = 1) -> String {
        try? FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try! Data().write(to: URL(fileURLWithPath: path))
        let handle = FileHandle(forWritingAtPath: path)!
        var state = seed &* 0x9E3779B97F4A7C15 | 1
        var remaining = size
        var block = [UInt64](repeating: 0, count: 1 << 17)
        while remaining > 0 {
            for i in block.indices { state ^= state << 13; state ^= state >> 7; state ^= state << 17; block[i] = state }
            let n = min(remaining, block.count * 8)
            block.withUnsafeBytes { handle.write(Data($0.prefix(n))) }
            remaining -= n
        }
        try? handle.close()
        return path
    }

    static func sameBytes(_ a: String, _ b: String) -> Bool {
        guard let x = FileManager.default.contents(atPath: a), let y = FileManager.default.contents(atPath: b) else { return false }
        return x == y
    }

    static func size(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? -1
    }
}

extension [JSONValue] {
    func ofType(_ type: String) -> [JSONValue] { filter { $0["type"]?.stringValue == type } }
}
