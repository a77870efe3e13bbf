import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A header value often comes from another step's output or a secret: a CR or LF in it would end
/// the header and start one the server reads as sent. Such a step fails before it sends anything.
@Suite(.serialized) struct HeaderInjectionTests {
    @Test(arguments: [
        ("X-Note", "v\\r\\nIdempotency-Key: injected"),
        ("X-Note", "v\\nIdempotency-Key: injected"),
        ("X-Note: a", "b"),
        ("Idempotency-Key\\r\\nX-Other", "injected"),
    ])
    func aHeaderThatWouldStartAnotherIsRefused(name: String, value: String) throws {
        let nginx = try Nginx()
        let runner = Runner()
        let file = runner.workflow("""
            version: 1
            name: header-injection
            steps:
              ask:
                uses: http.request
                retry: { max_attempts: 1 }
                with: { url: "\(nginx.base)/json", headers: { "\(name)": "\(value)" } }
            """)
        let before = nginx.accessLog.count  // the peer's own readiness probe
        let result = try runner.run(file)
        #expect(result.status == 1, "\(result.stdout.suffix(2000))")
        let failed = try #require(Runner.events(result.stdout).ofType("step.failed", step: "ask").last?["data"])
        #expect(failed["code"]?.stringValue == "bad_header", "\(failed)")
        let message = failed["error"]?.stringValue ?? ""
        #expect(!message.contains("injected"), "the message names the header, not its value: \(message)")
        #expect(nginx.accessLog.count == before, "nothing reached the server: \(nginx.accessLog)")
    }

    @Test func aPlainHeaderStillGoesThrough() throws {
        let nginx = try Nginx()
        let runner = Runner()
        let file = runner.workflow("""
            version: 1
            name: header-plain
            steps:
              ask:
                uses: http.request
                with: { url: "\(nginx.base)/json", headers: { Idempotency-Key: "k-1 with spaces: and a colon" } }
            """)
        let result = try runner.run(file)
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        #expect(nginx.accessLog.contains { $0.contains("/json 200") && $0.contains("idem=[k-1 with spaces: and a colon]") }, "\(nginx.accessLog)")
    }
}
