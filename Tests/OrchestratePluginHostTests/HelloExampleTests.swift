// The two example plugins of plugins/examples — hello-c in plain C, hello-rust in Rust with
// bindings written by hand from the header — built the way their READMEs say and driven through
// the host. They promise the same step with the same duties and results, so every test runs
// against both. Without cargo, the Rust cases are left out and `theRustExampleBuildsWithCargo`
// is skipped, saying why.
import Foundation
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateTestSupport
import Testing

/// One example plugin: where it comes from and what it calls itself.
enum ExamplePlugin: CaseIterable, Sendable, CustomTestStringConvertible {
    case c, rust

    var testDescription: String { self == .c ? "hello-c" : "hello-rust" }
    var pluginName: String { self == .c ? "example" : "example-rust" }
    var stepTypeID: String { self == .c ? "example.hello" : "example.hello-rust" }

    static let cSource = TestPaths.packageRoot.appendingPathComponent("plugins/examples/hello-c/hello.c")

    /// hello.c built with its README's command line, nothing added.
    static let builtC: Result<URL, TestFailure> = {
        let output = Fixtures.directory.file("hello.so")
        let cc = ProcessInfo.processInfo.environment["CC"] ?? "/usr/bin/cc"
        let args = ["-shared", "-fPIC", "-I", TestPaths.abiInclude.path, "-o", output.path, cSource.path]
        guard let result = try? ChildProcess.run(URL(fileURLWithPath: cc), args), result.status == 0 else {
            return .failure(TestFailure("cc \(args.joined(separator: " ")) failed"))
        }
        return .success(output)
    }()

    /// The examples this machine can build: the Rust one needs cargo.
    static let buildable = allCases.filter { $0 != .rust || Cargo.isAvailable }

    /// The plugin, loaded.
    func load() throws -> LoadedPlugin {
        try PluginLoader.load(path: (self == .c ? try Self.builtC.get() : try Cargo.helloRust.get()).path)
    }

    /// Its one step type, `stepTypeID`.
    func hello() throws -> StepType {
        try #require(try load().stepTypes.first)
    }
}

@Suite struct HelloExampleTests {
    @Test func theCExampleBuildsWithStrictWarnings() throws {
        let dir = TemporaryDirectory()
        try CCompiler.buildPlugin([ExamplePlugin.cSource], output: dir.file("hello-strict.so"), extraFlags: ["-Wextra", "-pedantic"])
    }

    /// Where cargo is absent this is the test that says so (skipped, with the reason); the
    /// tests below then run the C example alone.
    @Test(.enabled(if: Cargo.isAvailable, Comment(rawValue: Cargo.absentReason)))
    func theRustExampleBuildsWithCargo() throws {
        _ = try Cargo.helloRust.get()
    }

    @Test(arguments: ExamplePlugin.buildable)
    func describesItself(_ example: ExamplePlugin) throws {
        let plugin = try example.load()
        #expect(plugin.name == example.pluginName)
        #expect(plugin.stepTypes.map(\.id) == [example.stepTypeID])
        let step = try example.hello()
        #expect(step.inputSchema["required"] == ["name"])
        #expect(step.inputSchema["properties"]?["greeting"]?["default"] == "Hello")
        #expect(step.inputSchema["properties"]?["work_ms"]?["default"] == 0)
        #expect(step.outputSchema?["properties"]?["message"]?["type"] == "string")
        #expect(step.documentation?.isEmpty == false)
    }

    @Test(arguments: ExamplePlugin.buildable)
    func greets(_ example: ExamplePlugin) async throws {
        let delegate = RecordingDelegate()
        let invocation = StepInvocation(stepType: try example.hello(),
                                        request: request(["name": "Ada \"the\" Countess 😀", "greeting": "Good\nmorning"]),
                                        delegate: delegate)
        let outputs = try #require(await invocation.runOnThread().outputs)
        #expect(outputs == ["message": "Good\nmorning, Ada \"the\" Countess 😀!"])
        #expect(delegate.logs.map(\.1) == ["greeting Ada \"the\" Countess 😀 (attempt 1)"])
        #expect(delegate.progressReports.last == StepProgress(bytesDone: -1, bytesTotal: -1, filesDone: 10, filesTotal: 10))
    }

    @Test(arguments: ExamplePlugin.buildable)
    func missingNameIsInvalidInput(_ example: ExamplePlugin) async throws {
        // The host refuses it against the schema before the plugin runs.
        let invocation = StepInvocation(stepType: try example.hello(), request: request(["greeting": "Hi"]),
                                        delegate: RecordingDelegate())
        let failure = try #require(await invocation.runOnThread().failure)
        #expect(failure.kind == .invalidInput)
        #expect(failure.code == "invalid_input")
        #expect(failure.message == "step 'step-1': missing required input 'name' for step type '\(example.stepTypeID)'")
    }

    @Test(arguments: ExamplePlugin.buildable)
    func theDefaultsComeFromTheHost(_ example: ExamplePlugin) async throws {
        // Neither plugin writes a default of its own: "Hello" and work_ms 0 are its schema's,
        // filled in by the host (without them the step fails with bad_greeting / bad_work_ms).
        let delegate = RecordingDelegate()
        let invocation = StepInvocation(stepType: try example.hello(), request: request(["name": "Grace"]), delegate: delegate)
        #expect(await invocation.runOnThread().outputs == ["message": "Hello, Grace!"])
        #expect(delegate.progressReports.last == StepProgress(bytesDone: -1, bytesTotal: -1, filesDone: 10, filesTotal: 10),
                "work_ms (default 0) was read")
    }

    @Test(arguments: ExamplePlugin.buildable)
    func honoursCancel(_ example: ExamplePlugin) async throws {
        let invocation = StepInvocation(stepType: try example.hello(), request: request(["name": "Ada", "work_ms": 20_000]),
                                        delegate: RecordingDelegate())
        invocation.cancel(.cancelled, after: .milliseconds(150))
        let timed = await invocation.runTimed()
        #expect(timed.result.failure?.kind == .cancelled)
        #expect(timed.took < .seconds(1))
    }
}
