import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// TLS verification is on by default: a self-signed server is refused with a clear message;
/// `ca_file` trusts it; `insecure: true` skips verification with a warning.
@Suite(.serialized) struct TLSTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])

    /// nginx over HTTPS with a fresh self-signed certificate for 127.0.0.1.
    func selfSignedNginx() throws -> (Nginx, String) {
        let cert = runner.path("cert.pem"), key = runner.path("key.pem")
        let made = try Tools.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                                  "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert])
        guard made.status == 0 else { throw TestFailure("openssl: \(made.stderr)") }
        return (try Nginx(certificate: (cert, key)), cert)
    }

    func call(_ with: String) -> String {
        runner.workflow("""
            version: 1
            name: tls
            steps:
              call: { uses: http.request, retry: { max_attempts: 3, initial_interval: 10ms }, with: \(with) }
            outputs:
              hello: "${{ steps.call.outputs.json.hello }}"
            """)
    }

    @Test func aSelfSignedServerIsRefusedByDefault() throws {
        let (nginx, _) = try selfSignedNginx()
        let result = try runner.run(call("{ url: \"\(nginx.base)/json\" }"))
        #expect(result.status == 1)
        let events = Runner.events(result.stdout)
        let failed = try #require(events.ofType("step.failed", step: "call").last)
        #expect(failed["data"]?["code"]?.stringValue == "tls_verification_failed")
        #expect(failed["data"]?["kind"]?.stringValue == "permanent")
        let message = failed["data"]?["error"]?.stringValue ?? ""
        #expect(message.contains("TLS certificate verification failed"), "\(message)")
        #expect(message.contains("insecure: true"))
        #expect(events.ofType("step.retrying").isEmpty, "a refused certificate is not retried")
    }

    @Test func caFileTrustsItAndInsecureSkipsVerificationWithAWarning() throws {
        let (nginx, cert) = try selfSignedNginx()
        let trusted = try runner.run(call("{ url: \"\(nginx.base)/json\", ca_file: \"\(cert)\" }"))
        #expect(trusted.status == 0, "\(trusted.stdout)")
        #expect(Runner.events(trusted.stdout).runOutputs?["hello"]?.stringValue == "world")

        let insecure = try runner.run(call("{ url: \"\(nginx.base)/json\", insecure: true }"))
        #expect(insecure.status == 0)
        let warnings = Runner.events(insecure.stdout).ofType("step.log", step: "call").filter { $0["data"]?["level"]?.stringValue == "warn" }
        #expect(warnings.contains { $0["data"]?["message"]?.stringValue?.contains("TLS certificate verification is OFF") == true })
    }
}
