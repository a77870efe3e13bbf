import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestrateTestSupport
import Testing

/// The example workflows in `workflows/` that need no server, run as a user would run them.
/// (The HTTP and SFTP ones are run by their plugins' test targets against real peers.)
@Suite struct ExampleWorkflowTests {
    let h = Harness()

    @Test func localUploadPublishesAByteIdenticalCopyWithItsMetadata() throws {
        let source = h.path("clip.mov")
        try Data((0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }).write(to: URL(fileURLWithPath: source))
        let outbox = h.path("outbox")
        let workflow = TestPaths.packageRoot.appendingPathComponent("workflows/local-upload.yaml").path
        let result = try h.orchestrate(["run", workflow, "--input", "source=\(source)", "--input", "outbox=\(outbox)",
                                        "--input", "title=Clip \"one\""])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let published = outbox + "/published/clip.mov"
        #expect(FileManager.default.contentsEqual(atPath: source, andPath: published))
        #expect(!FileManager.default.fileExists(atPath: outbox + "/incoming/clip.mov"), "activated: moved out of incoming")
        let expected = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sha256sum"), [source]).stdout.prefix(64)
        let metadata = try JSONValue(parsing: try String(contentsOfFile: published + ".json", encoding: .utf8))
        #expect(metadata["sha256"]?.stringValue == String(expected))
        #expect(metadata["size"] == .int(8 << 20))
        let runID = try #require(try h.runIDs().first)
        #expect(try h.status(runID)["outputs"]?["sha256"]?.stringValue == String(expected))
    }

    @Test func localUploadFailingLateUndoesTheUpload() throws {
        // An outbox whose "published" is a file: the activation fails, the compensation removes
        // the uploaded copy from incoming.
        let source = h.path("clip.mov")
        try Data(repeating: 7, count: 1 << 20).write(to: URL(fileURLWithPath: source))
        let outbox = h.path("outbox")
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: outbox + "/published"))
        let workflow = TestPaths.packageRoot.appendingPathComponent("workflows/local-upload.yaml").path
        let result = try h.orchestrate(["run", workflow, "--input", "source=\(source)", "--input", "outbox=\(outbox)", "--json"])
        #expect(result.status == 1)
        #expect(Harness.events(result).ofType("run.compensating").count == 1)
        #expect(!FileManager.default.fileExists(atPath: outbox + "/incoming/clip.mov"))
    }

    static var exampleFiles: [String] {
        let directory = TestPaths.packageRoot.appendingPathComponent("workflows")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".yaml") }.sorted().map { directory.appendingPathComponent($0).path }
    }

    @Test func everyExampleWorkflowValidatesAgainstTheRealPlugins() throws {
        let files = Self.exampleFiles
        #expect(files.count >= 5)
        let result = try h.orchestrate(["validate"] + files)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
    }

    /// `max_rate` goes to steps that take `10M` as well as a number of bytes: the workflows'
    /// own input must take it too.
    @Test func exampleMaxRateInputsTakeTheStepsUnits() throws {
        var checked = 0
        for file in Self.exampleFiles {
            let workflow = try WorkflowLoader.load(path: file, catalog: nil)
            guard workflow.inputs.contains(where: { $0.name == "max_rate" }) else { continue }
            checked += 1
            do {
                _ = try workflow.resolveInputs(strings: ["max_rate": "10M"], json: [:], currentDirectory: "/")
            } catch {
                #expect(!error.messages.contains { $0.contains("max_rate") }, "\(file): \(error.messages)")
            }
        }
        #expect(checked >= 4)
    }

    /// The real plugins' schemas, as `validate` sees them: a malformed `sha256` (each plugin
    /// that takes one declares its pattern) and a misspelt output are refused before the night.
    @Test func theRealPluginsRefuseAMalformedSHA256AndAMisspeltOutput() throws {
        let file = h.workflow("""
            version: 1
            name: mistakes
            steps:
              fetch:
                uses: http.download
                with: { url: "https://example.com/a", destination: /tmp/a, sha256: abc }
              unchecked:
                uses: http.download
                with: { url: "https://example.com/b", destination: /tmp/b, sha256: "" }
              copy:
                needs: [fetch]
                uses: fs.copy
                with: { source: "${{ steps.fetch.outputs.paht }}", destination: /tmp/c, sha256: "not hex" }
              pull:
                uses: sftp.download
                with: { host: localhost, user: u, source: /a, destination: /tmp/d, sha256: "0123" }
            """, name: "mistakes.yaml")
        let result = try h.orchestrate(["validate", file])
        #expect(result.status == 2)
        let errors = result.stderr.split(separator: "\n").filter { $0.contains(": error: ") }
        #expect(errors.contains { $0.hasSuffix("'with.sha256' must match ^([0-9a-fA-F]{64})?$, not 'abc': "
                                                + "expected SHA-256 (hex) of the whole file; empty: not checked") }, "\(result.stderr)")
        #expect(errors.contains { $0.hasSuffix("'with.sha256' must match ^[0-9a-fA-F]{64}$, not 'not hex': expected SHA-256 (hex) of the content") },
                "\(result.stderr)")
        #expect(errors.contains { $0.contains("'with.sha256' must match ^[0-9a-fA-F]{64}$, not '0123'") }, "\(result.stderr)")
        #expect(errors.contains { $0.contains("step type 'http.download' has no output 'paht'") && $0.hasSuffix("did you mean 'path'?") },
                "\(result.stderr)")
        #expect(errors.count == 4, "only these: \(result.stderr)")
    }
}
