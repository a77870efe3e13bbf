import Foundation
import OrchestrateJSON
import OrchestrateTestSupport

/// A real `orchestrate serve --http 127.0.0.1:PORT` with the C test plugin, its default token,
/// and a read-only token from `--http-token-file`.
final class APIServe: @unchecked Sendable {
    let dir = TemporaryDirectory("api")
    let port = Ports.free()
    let process = Process()
    let readerToken = "reader-0123456789abcdef"
    var state: String { dir.file("state").path }
    var http: RawHTTP { RawHTTP(port: port) }
    private(set) var token = ""

    static let pluginDir: String = {
        let out = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("orchestrate-api-fixtures-\(getpid())")
        try! FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        _ = try! CCompiler.buildFixture("teststeps", into: out)
        return out.path
    }()

    var baseArguments: [String] { ["--state", state, "--plugin-path", APIServe.pluginDir] }

    /// `descriptorLimit`: serve runs under `ulimit -n` of it (through /bin/sh, which execs it).
    init(extra: [String] = [], descriptorLimit: Int? = nil) throws {
        let tokens = dir.write("tokens", "# name access token\nreader read \(readerToken)\n").path
        chmod(tokens, 0o600)  // serve refuses a token file others can read
        let arguments = ["serve", "--http", "127.0.0.1:\(port)", "--http-token-file", tokens] + extra + baseArguments
        if let descriptorLimit {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "ulimit -n \(descriptorLimit) && exec \"$0\" \"$@\"", TestPaths.orchestrate.path] + arguments
        } else {
            process.executableURL = TestPaths.orchestrate
            process.arguments = arguments
        }
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = try FileHandle(forWritingTo: dir.write("serve.err", ""))
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: state + "/http-token", encoding: .utf8),
               (try? http.request("GET", "/api/queues", token: nil))?.status == 401
            {
                token = text.trimmingCharacters(in: .whitespacesAndNewlines)
                return
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw StartFailure(description: "serve did not start: \((try? String(contentsOfFile: dir.file("serve.err").path, encoding: .utf8)) ?? "")")
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }

    func get(_ path: String) throws -> RawHTTP.Reply { try http.request("GET", path, token: token) }
    func post(_ path: String, _ body: JSONValue = [:]) throws -> RawHTTP.Reply { try http.request("POST", path, token: token, body: body.jsonText) }
    func put(_ path: String, _ body: JSONValue) throws -> RawHTTP.Reply { try http.request("PUT", path, token: token, body: body.jsonText) }

    func orchestrate(_ arguments: [String]) throws -> ProcessResult { try ChildProcess.orchestrate(arguments + baseArguments) }

    /// Polls `condition` every 20 ms for up to `timeout` seconds.
    func waitFor(_ timeout: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return try condition()
    }

    func status(_ id: String) throws -> String? { try get("/api/runs/\(id)").json["status"]?.stringValue }

    /// Registers a one-step workflow under `name` with these `on.schedule` entries (flow
    /// mappings, e.g. `{ cron: "0 3 * * *", timezone: Europe/Berlin }`).
    func registerSchedule(_ name: String, entries: [String]) throws {
        let file = dir.write("\(name).yaml", "version: 1\nname: scheduled\non:\n  schedule:\n"
            + entries.map { "    - \($0)\n" }.joined() + "steps:\n  a: { uses: test.noop }\n").path
        let added = try orchestrate(["schedule", "add", file, "--name", name])
        guard added.status == 0 else { throw StartFailure(description: "schedule add: \(added.stderr)") }
    }
}

struct StartFailure: Error, CustomStringConvertible {
    let description: String
}

extension APIServe {
    /// The raw text of `GET path` on an event stream until `done` says it has enough (or 10 s).
    func streamText(_ path: String, headers: [String: String] = [:], until done: (String) -> Bool) throws -> String {
        let fd = try RawHTTP.connect(port: port)
        defer { close(fd) }
        RawHTTP.send(fd, Array(RawHTTP.head("GET", path, token: token, headers: headers, bodyLength: nil).utf8))
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !done(text) {
            let n = Glibc.read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            text += String(decoding: buffer[0..<n], as: UTF8.self)
        }
        return text
    }
}
