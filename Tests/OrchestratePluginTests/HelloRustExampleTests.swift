// The Rust example plugin (plugins/examples/hello-rust), built by cargo from its hand-written
// bindings and driven through the host exactly like the C example: the same duties, the same
// results. Skipped, saying why, where cargo is absent.
import Foundation
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateTestSupport
import Testing

@Suite(.enabled(if: Cargo.isAvailable, Comment(rawValue: Cargo.absentReason)))
struct HelloRustExampleTests {
    private func hello() throws -> StepType {
        let plugin = try PluginLoader.load(path: try Cargo.helloRust.get().path)
        return try #require(plugin.stepTypes.first)
    }

    @Test func describesItself() throws {
        let plugin = try PluginLoader.load(path: try Cargo.helloRust.get().path)
        #expect(plugin.name == "example-rust")
        #expect(plugin.stepTypes.map(\.id) == ["example.hello-rust"])
        let step = try hello()
        #expect(step.inputSchema["required"] == ["name"])
        #expect(step.inputSchema["properties"]?["greeting"]?["default"] == "Hello")
        #expect(step.outputSchema?["properties"]?["message"]?["type"] == "string")
        #expect(step.documentation?.isEmpty == false)
    }

    @Test func greets() async throws {
        let delegate = RecordingDelegate()
        let invocation = StepInvocation(stepType: try hello(),
                                        request: request(["name": "Ada \"the\" Countess 😀", "greeting": "Good\nmorning"]),
                                        delegate: delegate)
        let outputs = try #require(await invocation.runOnThread().outputs)
        #expect(outputs == ["message": "Good\nmorning, Ada \"the\" Countess 😀!"])
        #expect(delegate.logs.map(\.1) == ["greeting Ada \"the\" Countess 😀 (attempt 1)"])
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
        #expect(failure.message == "step 'step-1': missing required input 'name' for step type 'example.hello-rust'")
    }

    @Test func honoursCancel() async throws {
        let invocation = StepInvocation(stepType: try hello(), request: request(["name": "Ada", "work_ms": 20_000]),
                                        delegate: RecordingDelegate())
        invocation.cancel(.cancelled, after: .milliseconds(150))
        let timed = await invocation.runTimed()
        #expect(timed.result.failure?.kind == .cancelled)
        #expect(timed.took < .seconds(1))
    }
}
