import Foundation
import OrchestrateJSON
import OrchestrateTestSupport

/// An S3 server on loopback for one test: `moto_server` (AWS's semantics; logs every request,
/// which is how a test counts what the server received) or `rclone serve s3` (checks every
/// signature). Both come from the test venv (scripts/requirements-test.txt). Stopped on deinit.
final class S3Peer: @unchecked Sendable {
    enum Kind: String { case moto, rclone }

    static let accessKey = "AKIDORCHESTRATE"
    static let secretKey = "orchestrate/secret+key=0"

    let kind: Kind
    let dir = TemporaryDirectory("s3peer")
    let port = Ports.free()
    var endpoint: String { "http://127.0.0.1:\(port)" }
    var log: String { dir.file("server.log").path }
    private let child: SpawnedChild

    init(_ kind: Kind) throws {
        self.kind = kind
        let bin = try PythonVenv.python().deletingLastPathComponent()
        switch kind {
        case .moto:
            child = try SpawnedChild([bin.appendingPathComponent("moto_server").path, "-H", "127.0.0.1", "-p", "\(port)"],
                                     stdout: dir.file("server.log").path, stderr: dir.file("server.log").path)
        case .rclone:
            let data = dir.file("data")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            child = try SpawnedChild([bin.appendingPathComponent("rclone").path, "serve", "s3", "--addr", "127.0.0.1:\(port)",
                                      "--auth-key", "\(Self.accessKey),\(Self.secretKey)", "--config", "/dev/null", "-vv", data.path],
                                     stdout: dir.file("server.log").path, stderr: dir.file("server.log").path)
        }
        guard Tools.waitFor(30, { Self.accepts(self.port) }) else { throw PeerFailure(description: "\(kind) did not start: \(serverLog)") }
    }

    deinit {
        kill(child.pid, SIGKILL)
        _ = child.wait(timeout: 5)
    }

    var serverLog: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// The AWS CLI (`aws s3api ...`) against this server, with the peer's keys.
    @discardableResult
    func aws(_ arguments: [String]) throws -> ProcessResult {
        let bin = try PythonVenv.python().deletingLastPathComponent()
        var env = ProcessInfo.processInfo.environment
        env["AWS_ACCESS_KEY_ID"] = Self.accessKey
        env["AWS_SECRET_ACCESS_KEY"] = Self.secretKey
        env["AWS_DEFAULT_REGION"] = "us-east-1"
        env["AWS_CONFIG_FILE"] = "/dev/null"
        env["AWS_SHARED_CREDENTIALS_FILE"] = "/dev/null"
        return try ChildProcess.run(bin.appendingPathComponent("aws"), ["--endpoint-url", endpoint] + arguments, environment: env)
    }

    func makeBucket(_ name: String) throws {
        let made = try aws(["s3api", "create-bucket", "--bucket", name])
        guard made.status == 0 else { throw PeerFailure(description: "create-bucket \(name): \(made.stderr)") }
    }

    /// The multipart uploads still open in `bucket`.
    func openUploads(_ bucket: String) throws -> [String] {
        let listed = try aws(["s3api", "list-multipart-uploads", "--bucket", bucket, "--output", "json"])
        guard listed.status == 0 else { throw PeerFailure(description: "list-multipart-uploads: \(listed.stderr)") }
        guard let json = try? JSONValue(parsing: listed.stdout) else { return [] }
        return (json["Uploads"]?.arrayValue ?? []).compactMap { $0["UploadId"]?.stringValue }
    }

    /// moto's request log: how many times each part number was PUT and answered 200.
    func partsReceived() -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for line in serverLog.split(separator: "\n") where line.contains("\"PUT ") && line.contains("partNumber=") && line.contains("\" 200 ") {
            guard let range = line.range(of: "partNumber=") else { continue }
            let digits = line[range.upperBound...].prefix { $0.isNumber }
            if let n = Int(digits) { counts[n, default: 0] += 1 }
        }
        return counts
    }

    private static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

struct PeerFailure: Error, CustomStringConvertible {
    let description: String
}

/// Runs the real `orchestrate` binary with one state directory, and the keys of a peer in its
/// environment (the plugin's credential chain reads them there).
final class S3Runner: @unchecked Sendable {
    let dir = TemporaryDirectory("s3")
    var state: String { dir.file("state").path }
    var environment: [String: String] = [
        "AWS_ACCESS_KEY_ID": S3Peer.accessKey, "AWS_SECRET_ACCESS_KEY": S3Peer.secretKey, "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    ]

    func path(_ name: String) -> String { dir.file(name).path }

    func workflow(_ yaml: String, name: String = "wf.yaml") -> String { dir.write(name, yaml).path }

    func arguments(_ file: String, _ extra: [String]) -> [String] { ["run", file, "--state", state, "--json"] + extra }

    func run(_ file: String, _ extra: [String] = []) throws -> ProcessResult {
        try ChildProcess.orchestrate(arguments(file, extra), environment: environment)
    }

    /// Starts a run without waiting (kill and cancel tests); its JSON events go to a file.
    func start(_ file: String, _ extra: [String] = []) throws -> SpawnedChild {
        try SpawnedChild([TestPaths.orchestrate.path] + arguments(file, extra), stdout: path("events.jsonl"), stderr: path("stderr.log"),
                         environment: environment)
    }

    func orchestrate(_ args: [String]) throws -> ProcessResult {
        try ChildProcess.orchestrate(args + ["--state", state], environment: environment)
    }

    func runIDs() throws -> [String] {
        Self.events(try orchestrate(["list", "--json"]).stdout).compactMap { $0["id"]?.stringValue }
    }

    func status(_ run: String) throws -> JSONValue { try JSONValue(parsing: try orchestrate(["status", run, "--json"]).stdout) }

    /// The outputs of step `step` in the last run (from `orchestrate status`).
    func stepOutputs(_ step: String) throws -> JSONValue? {
        guard let run = try runIDs().last else { return nil }
        return try status(run)["steps"]?.arrayValue?.last { $0["id"]?.stringValue == step }?["outputs"]
    }

    static func events(_ text: String) -> [JSONValue] {
        text.split(separator: "\n").compactMap { try? JSONValue(parsing: String($0)) }
    }
}

/// A tools/ script that serves on loopback and prints "listening on 127.0.0.1:PORT" (the
/// lost-answer proxy, the error server). Killed on deinit.
final class ScriptedServer: @unchecked Sendable {
    let address: String
    private let process = Process()

    init(_ script: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", TestPaths.packageRoot.appendingPathComponent("tools/\(script)").path] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        var line = [UInt8]()
        var byte: UInt8 = 0
        while read(out.fileHandleForReading.fileDescriptor, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        guard let address = String(decoding: line, as: UTF8.self).split(separator: " ").last, address.hasPrefix("127.0.0.1:") else {
            kill(process.processIdentifier, SIGKILL)
            throw PeerFailure(description: "\(script) did not start")
        }
        self.address = String(address)
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
