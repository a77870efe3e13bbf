import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `http.request` and `http.upload` (put) against nginx: JSON parsing, error kinds, Retry-After,
/// Idempotency-Key, WebDAV PUT.
@Suite(.serialized) struct NginxRequestTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])

    func single(_ with: String, retry: String = "{ max_attempts: 3, initial_interval: 10ms }", key: String = "") -> String {
        runner.workflow("""
            version: 1
            name: one
            steps:
              call:
                uses: http.request
                retry: \(retry)
                \(key.isEmpty ? "" : "idempotency_key: \"\(key)\"")
                with: \(with)
            outputs:
              status: "${{ steps.call.outputs.status }}"
              json: "${{ steps.call.outputs.json }}"
            """)
    }

    @Test func aJSONResponseIsParsedAndTheIdempotencyKeyIsSent() throws {
        let nginx = try Nginx()
        let result = try runner.run(single("{ url: \"\(nginx.base)/json\" }", key: "order-${{ run.id }}"))
        #expect(result.status == 0, "\(result.stderr)")
        let outputs = Runner.events(result.stdout).runOutputs
        #expect(outputs?["json"]?["hello"]?.stringValue == "world")
        #expect(outputs?["status"]?.intValue == 200)
        #expect(nginx.accessLog.contains { $0.contains("idem=[order-") }, "\(nginx.accessLog)")
    }

    @Test func a404IsPermanentWithTheServersMessage() throws {
        let nginx = try Nginx()
        let result = try runner.run(single("{ url: \"\(nginx.base)/status/404\" }"))
        #expect(result.status == 1)
        let events = Runner.events(result.stdout)
        let failed = try #require(events.ofType("step.failed", step: "call").last)
        #expect(failed["data"]?["kind"]?.stringValue == "permanent")
        #expect(failed["data"]?["code"]?.stringValue == "http_404")
        #expect(failed["data"]?["error"]?.stringValue?.contains("The requested video could not be found") == true, "\(failed)")
        #expect(events.ofType("step.retrying").isEmpty)
    }

    @Test func a429IsRetriedAfterTheServersRetryAfter() throws {
        let nginx = try Nginx()
        let result = try runner.run(single("{ url: \"\(nginx.base)/status/429\" }", retry: "{ max_attempts: 2, initial_interval: 10ms }"))
        #expect(result.status == 1)
        let retry = try #require(Runner.events(result.stdout).ofType("step.retrying", step: "call").first)
        #expect(retry["data"]?["code"]?.stringValue == "http_429")
        #expect(retry["data"]?["retry_after"]?.boolValue == true)
        #expect(retry["data"]?["delay_ms"]?.intValue == 2000, "\(retry)")
    }

    @Test func putToWebDAVIsByteIdentical() throws {
        let nginx = try Nginx()
        let source = runner.path("put.bin")
        try Tools.randomFile(source, bytes: TestSizes.big)
        let file = runner.workflow("""
            version: 1
            name: put
            steps:
              put:
                uses: http.upload
                idempotency_key: "put-${{ run.id }}"
                with: { url: "\(nginx.base)/dav/in/put.bin", file: "\(source)", protocol: put }
            outputs:
              status: "${{ steps.put.outputs.status }}"
            """)
        let result = try runner.run(file)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(Runner.events(result.stdout).runOutputs?["status"]?.intValue == 201)
        #expect(try Tools.sha256("\(nginx.dav)/in/put.bin") == (try Tools.sha256(source)))
        #expect(nginx.accessLog.contains { $0.hasPrefix("PUT /dav/in/put.bin 201") && $0.contains("idem=[put-") })
    }
}
