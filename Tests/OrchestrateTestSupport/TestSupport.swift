// Shared helpers for the test targets: where the built products are, compiling C plugins the way a
// third party would, temporary directories, and running the real `orchestrate` binary.
import Foundation

public enum TestPaths {
    /// The package root, derived from this file's location.
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The directory holding the built `orchestrate` executable and plugin libraries:
    /// `$ORCHESTRATE_BIN_DIR` when set (the test script sets it), else the directory of the
    /// running test bundle (SwiftPM puts it beside the products).
    public static let productsDir: URL = {
        if let dir = ProcessInfo.processInfo.environment["ORCHESTRATE_BIN_DIR"], !dir.isEmpty {
            return URL(fileURLWithPath: dir)
        }
        var url = Bundle.main.bundleURL
        // On Linux the test runner is `<bin>/orchestratePackageTests.xctest`.
        while url.path != "/" {
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("orchestrate").path),
               !url.lastPathComponent.hasSuffix(".xctest")
            {
                return url
            }
            url.deleteLastPathComponent()
        }
        return packageRoot.appendingPathComponent(".build/debug")
    }()

    /// The built `orchestrate` executable.
    public static var orchestrate: URL { productsDir.appendingPathComponent("orchestrate") }

    /// The directory with the ABI header (`orchestrate/plugin.h`).
    public static var abiInclude: URL {
        packageRoot.appendingPathComponent("Sources/COrchestratePlugin/include")
    }

    /// C sources of the test-only fixture plugins.
    public static var fixturePlugins: URL {
        packageRoot.appendingPathComponent("Tests/Fixtures/plugins")
    }
}

/// A fresh private temporary directory, removed when the value is deinitialised unless
/// `ORCHESTRATE_KEEP_TMP` is set.
public final class TemporaryDirectory: @unchecked Sendable {
    public let url: URL
    public var path: String { url.path }

    public init(_ label: String = "orchestrate-test") {
        let base = URL(fileURLWithPath: NSTemporaryDirectory())
        url = base.appendingPathComponent("\(label)-\(UUID().uuidString.prefix(8))")
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o700])
    }

    public func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    @discardableResult
    public func write(_ name: String, _ text: String) -> URL {
        let target = file(name)
        try? FileManager.default.createDirectory(at: target.deletingLastPathComponent(),
                                                 withIntermediateDirectories: true)
        try! text.write(to: target, atomically: true, encoding: .utf8)
        return target
    }

    deinit {
        if ProcessInfo.processInfo.environment["ORCHESTRATE_KEEP_TMP"] == nil {
            try? FileManager.default.removeItem(at: url)
        }
    }
}

/// The result of a finished child process.
public struct ProcessResult: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String
    /// True when the process was ended by a signal (then `status` is the signal number).
    public let signalled: Bool
}

public enum ChildProcess {
    /// Runs `executable` with `arguments` to completion and captures its output.
    @discardableResult
    public static func run(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
                           currentDirectory: URL? = nil, stdin: String? = nil) throws -> ProcessResult
    {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let currentDirectory { process.currentDirectoryURL = currentDirectory }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let input = Pipe()
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try? input.fileHandleForWriting.close()
        // Drain stderr on another thread so a chatty child cannot block on a full pipe.
        let errBox = DataBox()
        let done = DispatchSemaphore(value: 0)
        Thread {
            errBox.data = err.fileHandleForReading.readDataToEndOfFile()
            done.signal()
        }.start()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        done.wait()
        let errData = errBox.data
        process.waitUntilExit()
        return ProcessResult(status: process.terminationStatus,
                             stdout: String(decoding: outData, as: UTF8.self),
                             stderr: String(decoding: errData, as: UTF8.self),
                             signalled: process.terminationReason == .uncaughtSignal)
    }

    /// Runs the built `orchestrate` binary.
    @discardableResult
    public static func orchestrate(_ arguments: [String], environment: [String: String] = [:],
                                   currentDirectory: URL? = nil) throws -> ProcessResult
    {
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        return try run(TestPaths.orchestrate, arguments, environment: env, currentDirectory: currentDirectory)
    }
}

public enum CCompiler {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Compiles C `sources` into a shared library at `output` exactly as a third-party plugin
    /// author would: `cc -shared -fPIC -I <abi include>`, nothing else.
    public static func buildPlugin(_ sources: [URL], output: URL, extraFlags: [String] = []) throws {
        let cc = ProcessInfo.processInfo.environment["CC"] ?? "/usr/bin/cc"
        let args = ["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-std=c99", "-D_POSIX_C_SOURCE=200809L",
                    "-I", TestPaths.abiInclude.path, "-o", output.path] + extraFlags + sources.map(\.path)
        let result = try ChildProcess.run(URL(fileURLWithPath: cc), args)
        guard result.status == 0 else {
            throw Failure(description: "cc \(args.joined(separator: " ")) failed:\n\(result.stderr)")
        }
    }

    /// Builds the fixture plugin `Tests/Fixtures/plugins/<name>.c` into `directory/<name>.so`.
    public static func buildFixture(_ name: String, into directory: URL, extraFlags: [String] = []) throws -> URL {
        let output = directory.appendingPathComponent("\(name).so")
        try buildPlugin([TestPaths.fixturePlugins.appendingPathComponent("\(name).c")], output: output,
                        extraFlags: extraFlags)
        return output
    }
}

private final class DataBox: @unchecked Sendable {
    var data = Data()
}
