// The plain-C example plugin, built from the header alone exactly as its README says, and run.
import Foundation
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateTestSupport
import Testing

@Suite struct HelloCExampleTests {
    static let source = TestPaths.packageRoot.appendingPathComponent("plugins/examples/hello-c/hello.c")

    /// Built with the README's command line, nothing added.
    static let built: Result<URL, TestFailure> = {
        let output = Fixtures.directory.file("hello.so")
        let cc = ProcessInfo.processInfo.environment["CC"] ?? "/usr/bin/cc"
        let args = ["-shared", "-fPIC", "-I", TestPaths.abiInclude.path, "-o", output.path, source.path]
        guard let result = try? ChildProcess.run(URL(fileURLWithPath: cc), args), result.status == 0 else {
            return .failure(TestFailure("cc \(args.joined(separator: " ")) failed"))
        }
        return .success(output)
    }()

    private func hello() throws -> StepType {
        let plugin = try PluginLoader.load(path: try Self.built.get().path)
        return try #require(plugin.stepTypes.first)
    }

    @Test func buildsWithStrictWarnings() throws {
        let dir = TemporaryDirectory()
        try CCompiler.buildPlugin([Self.source], output: dir.file("hello-strict.so"), extraFlags: ["-Wextra", "-pedantic"])
    }

    @Test func describesItself() throws {
        let plugin = try PluginLoader.load(path: try Self.built.get().path)
        #expect(plugin.name == "example")
        #expect(plugin.stepTypes.map(\.id) == ["example.hello"])
        let step = try hello()
        #expect(step.inputSchema["required"] == ["name"])
        #expect(step.outputSchema?["properties"]?["message"]?["type"] == "string")
        #expect(step.documentation?.isEmpty == false)
    }

    @Test func greets() async throws {
        let delegate = RecordingDelegate()
        let invocation = StepInvocation(stepType: try hello(), request: request(["name": "Ada \"the\" Countess", "greeting": "Good morning"]),
                                        delegate: delegate)
        let outputs = try #require(await invocation.runOnThread().outputs)
        #expect(outputs == ["message": "Good morning, Ada \"the\" Countess!"])
        #expect(delegate.logs.map(\.1) == ["greeting Ada \"the\" Countess (attempt 1)"])
        #expect(delegate.progressReports.last == StepProgress(bytesDone: -1, bytesTotal: -1, filesDone: 10, filesTotal: 10))
        let plain = StepInvocation(stepType: try hello(), request: request(["name": "Bob"]), delegate: RecordingDelegate())
        #expect(await plain.runOnThread().outputs == ["message": "Hello, Bob!"])
    }

    @Test func missingNameIsInvalidInput() async throws {
        // The host refuses it against the schema before the plugin runs.
        let invocation = StepInvocation(stepType: try hello(), request: request(["greeting": "Hi"]), delegate: RecordingDelegate())
        let failure = try #require(await invocation.runOnThread().failure)
        #expect(failure.kind == .invalidInput)
        #expect(failure.code == "invalid_input")
        #expect(failure.message == "step 'step-1': missing required input 'name' for step type 'example.hello'")
    }

    @Test func theDefaultsComeFromTheHost() async throws {
        // hello.c writes no default of its own: "Hello" and work_ms 0 are its schema's, filled in
        // by the host (without them the step fails with bad_greeting / bad_work_ms).
        let delegate = RecordingDelegate()
        let invocation = StepInvocation(stepType: try hello(), request: request(["name": "Grace"]), delegate: delegate)
        #expect(await invocation.runOnThread().outputs == ["message": "Hello, Grace!"])
        #expect(delegate.progressReports.last == StepProgress(bytesDone: -1, bytesTotal: -1, filesDone: 10, filesTotal: 10),
                "work_ms (default 0) was read")
    }

    @Test func honoursCancel() async throws {
        let invocation = StepInvocation(stepType: try hello(), request: request(["name": "Ada", "work_ms": 20_000]),
                                        delegate: RecordingDelegate())
        invocation.cancel(.cancelled, after: .milliseconds(150))
        let timed = await invocation.runTimed()
        let (result, took) = (timed.result, timed.took)
        #expect(result.failure?.kind == .cancelled)
        #expect(took < .seconds(1))
    }
}
