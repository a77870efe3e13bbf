import Foundation

/// The Python of the test suite's virtual environment, with the PyPI packages of
/// scripts/requirements-test.txt (prometheus-client, schemathesis…), made by
/// scripts/python-venv.sh on first use. `$ORCHESTRATE_TEST_PYTHON` (set by scripts/test.sh)
/// skips the script.
public enum PythonVenv {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public static func python() throws -> URL {
        if let python = ProcessInfo.processInfo.environment["ORCHESTRATE_TEST_PYTHON"], !python.isEmpty {
            return URL(fileURLWithPath: python)
        }
        let script = TestPaths.packageRoot.appendingPathComponent("scripts/python-venv.sh")
        let made = try ChildProcess.run(URL(fileURLWithPath: "/bin/bash"), [script.path])
        guard made.status == 0 else { throw Failure(description: "scripts/python-venv.sh failed: \(made.stderr)") }
        return URL(fileURLWithPath: made.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// A script of Tests/python run with the venv's Python.
    public static func run(_ script: String, _ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        return try ChildProcess.run(try python(), [TestPaths.packageRoot.appendingPathComponent("Tests/python/\(script)").path] + arguments,
                                    environment: env)
    }
}
