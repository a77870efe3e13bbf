import Foundation
import OrchestrateJSON

/// Runs the real `orchestrate` binary (with its built-in plugins beside it) against one state
/// directory, and reads the JSON events of its runs.
public final class Runner: @unchecked Sendable {
    public let dir = TemporaryDirectory("runner")
    public var state: String { dir.file("state").path }
    public let environment: [String: String]

    public init(environment: [String: String] = [:]) {
        self.environment = environment
    }

    public static func workflow(_ name: String) -> String {
        TestPaths.packageRoot.appendingPathComponent("workflows/\(name)").path
    }

    public func path(_ name: String) -> String { dir.file(name).path }

    public func arguments(_ file: String, _ inputs: [String: String]) -> [String] {
        ["run", file, "--state", state, "--json"] + inputs.sorted { $0.key < $1.key }.flatMap { ["--input", "\($0.key)=\($0.value)"] }
    }

    /// `orchestrate run FILE --json` to completion.
    public func run(_ file: String, _ inputs: [String: String] = [:]) throws -> ProcessResult {
        try ChildProcess.orchestrate(arguments(file, inputs), environment: environment)
    }

    /// Starts a run without waiting (for kill and cancel tests); stdout (JSON events) to a file.
    public func start(_ file: String, _ inputs: [String: String] = [:], events: String = "events.jsonl",
               extra: [String] = []) throws -> Process
    {
        let process = Process()
        process.executableURL = TestPaths.orchestrate
        process.arguments = arguments(file, inputs) + extra
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        process.environment = env
        try Data().write(to: URL(fileURLWithPath: path(events)))
        process.standardOutput = FileHandle(forWritingAtPath: path(events))
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        return process
    }

    public func orchestrate(_ args: [String]) throws -> ProcessResult {
        try ChildProcess.orchestrate(args + ["--state", state], environment: environment)
    }

    public func runIDs() throws -> [String] {
        Runner.events(try orchestrate(["list", "--json"]).stdout).compactMap { $0["id"]?.stringValue }
    }

    public func status(_ run: String) throws -> JSONValue { try JSONValue(parsing: try orchestrate(["status", run, "--json"]).stdout) }

    public static func events(_ text: String) -> [JSONValue] {
        text.split(separator: "\n").compactMap { try? JSONValue(parsing: String($0)) }
    }

    /// A workflow written for one test.
    public func workflow(_ yaml: String, name: String = "wf.yaml") -> String { dir.write(name, yaml).path }
}

extension [JSONValue] {
    public func ofType(_ type: String, step: String? = nil) -> [JSONValue] {
        filter { $0["type"]?.stringValue == type && (step == nil || $0["step"]?.stringValue == step) }
    }

    /// The run's outputs, from its final `run.*` event.
    public var runOutputs: JSONValue? {
        last { ($0["type"]?.stringValue ?? "").hasPrefix("run.") && $0["data"]?["outputs"] != nil }?["data"]?["outputs"]
    }
}
