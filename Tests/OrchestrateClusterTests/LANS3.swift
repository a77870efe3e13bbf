import Foundation
import OrchestrateJSON
import OrchestrateTestSupport

/// moto_server (from the test venv) listening on the LAN's host address, so the machines reach
/// it; its request log is how a test counts what the server received. The S3 tests' `S3Peer`
/// is the loopback twin of this one.
final class LANS3: @unchecked Sendable {
    static let accessKey = "AKIDORCHESTRATE"
    static let secretKey = "orchestrate/secret+key=0"
    /// What a worker needs in its environment to sign with this server's keys (and nothing
    /// from the host's own AWS files).
    static let environment = [
        "AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey, "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    ]

    let dir = TemporaryDirectory("cluster-s3")
    let endpoint: String
    private let process: SpawnedChild
    private var log: String { dir.file("server.log").path }

    init(cluster: Cluster) throws {
        let bin = try PythonVenv.python().deletingLastPathComponent()
        let port = Ports.free()
        endpoint = "http://\(cluster.lan.hostAddress):\(port)"
        process = try SpawnedChild([bin.appendingPathComponent("moto_server").path, "-H", cluster.lan.hostAddress, "-p", "\(port)"],
                                   stdout: dir.file("server.log").path, stderr: dir.file("server.log").path)
        guard Tools.waitFor(30, { (try? self.aws(["s3api", "list-buckets"]).status) == 0 }) else {
            kill(process.pid, SIGKILL)
            throw TestFailure("moto_server did not start: \(serverLog)")
        }
    }

    func stop() { kill(process.pid, SIGKILL); _ = process.wait(timeout: 5) }

    var serverLog: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// The AWS CLI (`aws s3api ...`) against this server, with its keys.
    @discardableResult
    func aws(_ arguments: [String]) throws -> ProcessResult {
        let bin = try PythonVenv.python().deletingLastPathComponent()
        var env = ProcessInfo.processInfo.environment
        for (name, value) in Self.environment { env[name] = value }
        return try ChildProcess.run(bin.appendingPathComponent("aws"), ["--endpoint-url", endpoint] + arguments, environment: env)
    }

    /// The multipart uploads still open in `bucket`.
    func openUploads(_ bucket: String) throws -> [String] {
        let listed = try aws(["s3api", "list-multipart-uploads", "--bucket", bucket, "--output", "json"])
        guard listed.status == 0 else { throw TestFailure("list-multipart-uploads: \(listed.stderr)") }
        guard let json = try? JSONValue(parsing: listed.stdout) else { return [] }
        return (json["Uploads"]?.arrayValue ?? []).compactMap { $0["UploadId"]?.stringValue }
    }

    /// The request lines of moto's log answered 200 (`"PUT /b/k?partNumber=3&uploadId=X HTTP/1.1" 200 -`).
    func answered(_ method: String) -> [String] {
        serverLog.split(separator: "\n").filter { $0.contains("\"\(method) ") && $0.contains("\" 200 ") }.map(String.init)
    }

    /// How many times each part number was PUT and answered 200.
    func partsReceived() -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for line in answered("PUT") {
            guard let range = line.range(of: "partNumber=") else { continue }
            if let n = Int(line[range.upperBound...].prefix { $0.isNumber }) { counts[n, default: 0] += 1 }
        }
        return counts
    }
}
