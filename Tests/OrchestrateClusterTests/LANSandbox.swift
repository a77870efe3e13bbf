import Foundation
import OrchestrateJSON
import OrchestrateTestSupport

/// The sandbox (a Vimeo-style API) listening on the LAN's host address, so the machines reach it.
final class LANSandbox: @unchecked Sendable {
    let dir = TemporaryDirectory("cluster-sandbox")
    let process: SpawnedChild
    let url: String

    init(cluster: Cluster) throws {
        let out = dir.file("out").path
        process = try SpawnedChild([TestPaths.productsDir.appendingPathComponent("orchestrate-sandbox").path,
                                    "--host", cluster.lan.hostAddress, "--port", "0", "--data-dir", dir.file("data").path],
                                   stdout: out, stderr: dir.file("err").path)
        var found: String?
        _ = Tools.waitFor(15) {
            let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            if let range = text.range(of: "http://") {
                found = String(text[range.lowerBound...]).trimmingCharacters(in: .whitespacesAndNewlines)
            }
            return found != nil
        }
        guard let found else { kill(process.pid, SIGKILL); throw TestFailure("the sandbox did not start") }
        url = found
    }

    func stop() { kill(process.pid, SIGTERM); _ = process.wait(timeout: 5) }

    func videos() throws -> [JSONValue] {
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "--max-time", "10", "\(url)/_sandbox/state"])
        return try JSONValue(parsing: result.stdout)["videos"]?.arrayValue ?? []
    }

    /// The video run `runID` created (its create step's idempotency key starts with the run id).
    func videoFor(runID: String, cluster: Cluster) throws -> JSONValue? {
        try videos().first { $0["idempotency_key"]?.stringValue?.hasPrefix("\(runID)/") == true }
    }

    func videoFile(_ uri: String) -> String { dir.file("data/videos/\(uri.split(separator: "/").last!).bin").path }
}
