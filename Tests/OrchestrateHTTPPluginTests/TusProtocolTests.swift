import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// tus details the workflows do not exercise: the creation extension, and an upload that has
/// gone (404/410) failing permanently with a clear error instead of being retried; the inputs a
/// creation endpoint needs (`create: true`, and `metadata` only with it).
@Suite(.serialized) struct TusProtocolTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])

    func tusStep(_ with: String) -> String {
        runner.workflow("""
            version: 1
            name: tus
            steps:
              up:
                uses: http.upload
                retry: { max_attempts: 3, initial_interval: 10ms }
                with: \(with)
            outputs:
              upload_url: "${{ steps.up.outputs.upload_url }}"
            """)
    }

    @Test func creationPostsUploadLengthAndUploadsToTheLocation() throws {
        let sandbox = try Sandbox()
        let source = runner.path("a.bin")
        try Tools.randomFile(source, bytes: 5_000_000)
        let result = try runner.run(tusStep(
            "{ url: \"\(sandbox.url)/tus\", file: \"\(source)\", protocol: tus, create: true, chunk_size: 1000000, metadata: { filename: a.bin } }"))
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        let link = try #require(Runner.events(result.stdout).runOutputs?["upload_url"]?.stringValue)
        #expect(link.hasPrefix("\(sandbox.url)/upload/"), "relative Location not resolved: \(link)")
        let video = try #require(try sandbox.videos().first)
        #expect(video["received"]?.intValue == 5_000_000)
        #expect(try Tools.sha256(sandbox.videoFile(video["uri"]!.stringValue!)) == (try Tools.sha256(source)))
    }

    /// A creation endpoint given as the upload URL (create: true forgotten): the server answers
    /// HEAD with 405, and the error says what the URL looks like and which input to set.
    @Test func aCreationEndpointWithoutCreateSaysToSetCreate() throws {
        let sandbox = try Sandbox()
        let source = runner.path("c.bin")
        try Tools.randomFile(source, bytes: 10_000)
        let result = try runner.run(tusStep("{ url: \"\(sandbox.url)/tus\", file: \"\(source)\", protocol: tus }"))
        #expect(result.status == 1)
        let events = Runner.events(result.stdout)
        let failed = try #require(events.ofType("step.failed", step: "up").last?["data"])
        #expect(failed["kind"]?.stringValue == "invalid-input")
        let error = failed["error"]?.stringValue ?? ""
        #expect(error.contains("HEAD \(sandbox.url)/tus answered 405"), "\(error)")
        #expect(error.contains("looks like a tus creation endpoint"), "\(error)")
        #expect(error.contains("set create: true"), "\(error)")
        #expect(events.ofType("step.retrying").isEmpty, "a wrong input is not retried")
        #expect(try sandbox.videos().isEmpty)
    }

    /// `metadata` is only ever sent on creation: without `create: true` it is refused before
    /// anything runs, by `validate` (FILE:LINE:COL, exit 2) and `run` alike, pointing at the input.
    @Test func metadataWithoutCreateIsAValidationError() throws {
        let file = tusStep("""
            { url: "https://tus.example/files/1", file: /tmp/f, protocol: tus, metadata: { filename: f } }
            """)
        let validate = try runner.orchestrate(["validate", file])
        #expect(validate.status == 2)
        let line = "\(file):7:78: error: missing required input 'create' for step type 'http.upload': "
            + "tus sends metadata only when it creates the upload: set create: true (url is then the creation endpoint) or remove metadata"
        #expect(validate.stderr.contains(line), "\(validate.stderr)")

        let explicit = tusStep("""
            { url: "https://tus.example/files", file: /tmp/f, protocol: tus, metadata: { filename: f }, create: false }
            """)
        let refused = try runner.orchestrate(["validate", explicit])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("error: 'with.create' must be true, not false: tus sends metadata only when it creates the upload"),
                "\(refused.stderr)")
        #expect(try runner.run(explicit).status == 2, "run refuses it before starting")

        // Known only at run time: the host refuses it the same way, before the plugin runs.
        let source = runner.path("f.bin")
        try Tools.randomFile(source, bytes: 100)
        let late = runner.workflow("""
            version: 1
            name: tus-late
            inputs:
              create: { type: boolean, default: false }
            steps:
              up:
                uses: http.upload
                with: { url: "http://127.0.0.1:9/files", file: "\(source)", protocol: tus, metadata: { filename: f },
                        create: "${{ inputs.create }}" }
            """, name: "late.yaml")
        let ran = try runner.run(late)
        #expect(ran.status == 1)
        let failed = try #require(Runner.events(ran.stdout).ofType("step.failed", step: "up").last?["data"])
        #expect(failed["kind"]?.stringValue == "invalid-input")
        #expect(failed["error"]?.stringValue?.hasPrefix(
            "step 'up': input 'create' must be true, not false: tus sends metadata only when it creates the upload: set create: true") == true,
            "\(failed)")
    }

    @Test func aRemovedUploadFailsPermanentlyAsExpired() throws {
        let sandbox = try Sandbox()
        let source = runner.path("b.bin")
        try Tools.randomFile(source, bytes: 100_000)
        let created = try Tools.run(["curl", "-sS", "-X", "POST", "-H", "Authorization: bearer \(Sandbox.token)",
                                     "--data", #"{"upload":{"approach":"tus","size":100000}}"#, "\(sandbox.url)/me/videos"])
        let link = try #require(try JSONValue(parsing: created.stdout)["upload"]?["upload_link"]?.stringValue)
        _ = try Tools.run(["curl", "-sS", "-X", "DELETE", "-H", "Tus-Resumable: 1.0.0", link])  // tus termination
        let result = try runner.run(tusStep("{ url: \"\(link)\", file: \"\(source)\", protocol: tus }"))
        #expect(result.status == 1)
        let events = Runner.events(result.stdout)
        let failed = try #require(events.ofType("step.failed", step: "up").last)
        #expect(failed["data"]?["code"]?.stringValue == "upload_expired")
        #expect(failed["data"]?["error"]?.stringValue?.contains("expired or was removed") == true)
        #expect(events.ofType("step.retrying").isEmpty)
    }
}
