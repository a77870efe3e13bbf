import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// tus details the workflows do not exercise: the creation extension, and an upload that has
/// gone (404/410) failing permanently with a clear error instead of being retried.
@Suite(.serialized) struct TusProtocolTests {
    let runner = Runner()

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
