import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Plugins as a workflow author meets them: the plain-C example built from the header alone,
/// and broken plugins refused with a reason the workflow's errors point to.
@Suite struct PluginWorkflowTests {
    let h = Harness()

    @Test func theCExampleBuiltByCCFromTheHeaderAloneRunsInAWorkflow() throws {
        let pluginDir = h.dir.file("c-plugins")
        try FileManager.default.createDirectory(at: pluginDir, withIntermediateDirectories: true)
        let source = TestPaths.packageRoot.appendingPathComponent("plugins/examples/hello-c/hello.c")
        try CCompiler.buildPlugin([source], output: pluginDir.appendingPathComponent("hello.so"))
        let file = h.workflow("""
            version: 1
            name: hello
            steps:
              greet: { uses: example.hello, with: { name: Ada } }
            outputs:
              message: "${{ steps.greet.outputs.message }}"
            """)
        let result = try h.orchestrate(["run", file, "--plugin-path", pluginDir.path])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("message: ") && result.stdout.contains("Ada"))
    }

    @Test(.enabled(if: Cargo.isAvailable, Comment(rawValue: Cargo.absentReason)))
    func theRustExampleBuiltByCargoRunsInAWorkflow() throws {
        let library = try Cargo.helloRust.get()
        let file = h.workflow("""
            version: 1
            name: hello-rust
            steps:
              greet: { uses: example.hello-rust, with: { name: Ada, greeting: Good morning, work_ms: 50 } }
              plain: { uses: example.hello-rust, with: { name: "Bob é" }, needs: [greet] }
            outputs:
              greeting: "${{ steps.greet.outputs.message }}"
              plain: "${{ steps.plain.outputs.message }}"
            """)
        let result = try h.orchestrate(["run", file, "--plugin-path", library.path])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let runID = try #require(try h.runIDs().first)
        let outputs = try h.status(runID)["outputs"]
        #expect(outputs?["greeting"] == "Good morning, Ada!")
        #expect(outputs?["plain"] == "Hello, Bob é!")

        let inspected = try h.orchestrate(["plugins", "inspect", "example.hello-rust", "--plugin-path", library.path])
        #expect(inspected.status == 0, "\(inspected.stderr)")
        #expect(inspected.stdout.contains("Greet someone (an example plugin written in Rust)."))
    }

    @Test func refusedPluginsAreNamedWithTheirReasons() throws {
        let pluginDir = h.dir.file("bad-plugins")
        try FileManager.default.createDirectory(at: pluginDir, withIntermediateDirectories: true)
        _ = try CCompiler.buildFixture("abi_major2", into: pluginDir)
        _ = try CCompiler.buildFixture("no_entry", into: pluginDir)
        try "this is not a library".write(to: pluginDir.appendingPathComponent("text.so"), atomically: true, encoding: .utf8)
        let file = h.workflow("""
            version: 1
            name: refused
            steps:
              a: { uses: test.noop }
              b: { uses: future.step, needs: [a] }
            """)
        let result = try h.orchestrate(["run", file, "--plugin-path", pluginDir.path])
        #expect(result.status == 2)
        #expect(result.stderr.contains("wf.yaml:5:"))
        #expect(result.stderr.contains("unknown step type 'future.step'"))
        let notes = result.stderr.split(separator: "\n").filter { $0.hasPrefix("note: ") }
        #expect(notes.contains { $0.contains("abi_major2.so") && $0.contains("2.0") })
        #expect(notes.contains { $0.contains("no_entry.so") && $0.contains("orchestrate_plugin_entry_v1") })
        #expect(notes.contains { $0.contains("text.so") && $0.contains("not a shared library") })
    }
}
