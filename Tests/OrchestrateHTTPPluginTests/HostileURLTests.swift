import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// URLs a hostile server hands back (tools/badserver.py): an upload link or a redirect to
/// `file://`, `ftp://`, `gopher://`, `dict://`, `scp://`; a redirect to another origin, or from
/// https to http. HTTP steps speak only http and https, and the step's headers stay with the
/// origin they were written for.
@Suite(.serialized) struct HostileURLTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])
    let server: BadServer
    /// A file of the test machine that a `file://` URL names.
    let victim: String
    static let precious = "precious local content\n"

    init() throws {
        server = try BadServer()
        victim = runner.path("victim")
        try Self.precious.write(toFile: victim, atomically: true, encoding: .utf8)
    }

    static func encoded(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }

    func redirect(to target: String, status: Int = 302, on base: String? = nil) -> String {
        "\(base ?? server.url)/redirect?status=\(status)&to=\(Self.encoded(target))"
    }

    func step(_ uses: String, _ with: String, id: String = "s", before: String = "", needs: [String] = []) -> String {
        runner.workflow("""
            version: 1
            name: hostile
            steps:
            \(before)
              \(id):
                uses: \(uses)
                needs: [\(needs.joined(separator: ", "))]
                timeout: 60s
                retry: { max_attempts: 1 }
                with: \(with)
            """)
    }

    /// Runs the workflow, expects step `id` to fail, and returns its error (code, message).
    func failure(_ file: String, step id: String = "s") throws -> (code: String, message: String) {
        let result = try runner.run(file)
        #expect(result.status == 1, "\(result.stdout.suffix(2000))")
        let failed = try #require(Runner.events(result.stdout).ofType("step.failed", step: id).last, "\(result.stdout.suffix(2000))")
        return (failed["data"]?["code"]?.stringValue ?? "", failed["data"]?["error"]?.stringValue ?? "")
    }

    /// The outputs of step `id` of a workflow expected to succeed (from `status --json`).
    func outputs(_ file: String, step id: String = "s") throws -> JSONValue {
        let result = try runner.run(file)
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        let run = try #require(try runner.runIDs().last)
        let steps = try runner.status(run)["steps"]?.arrayValue ?? []
        return try #require(steps.first { $0["id"]?.stringValue == id }?["outputs"], "\(steps)")
    }

    func expectVictimUntouched() {
        #expect((try? String(contentsOfFile: victim, encoding: .utf8)) == Self.precious, "the local file was changed")
    }

    @Test func aFileUploadLinkFromTheServerNeverTouchesALocalFile() throws {
        let source = runner.path("video.bin")
        try Tools.randomFile(source, bytes: 100_000)
        // The shape of workflows/vimeo-upload.yaml: the API's answer names the upload link.
        let create = "  create:\n    uses: http.request\n"
            + "    with: { method: POST, url: \"\(server.url)/upload-ticket?link=\(Self.encoded("file://" + victim))\", json: {} }"
        for proto in ["vimeo-streaming", "put", "post", "tus"] {
            let error = try failure(step("http.upload", """
                { url: "${{ steps.create.outputs.json.upload.upload_link }}", file: "\(source)", protocol: \(proto) }
                """, before: create, needs: ["create"]))
            #expect(error.code == "unsupported_scheme", "\(proto): \(error)")
            #expect(error.message.contains("http steps speak only http and https, not file"), "\(proto): \(error.message)")
            expectVictimUntouched()
        }
    }

    @Test func aRequestOrDownloadOfAFileURLReadsNothing() throws {
        let request = try failure(step("http.request", #"{ url: "file://\#(victim)" }"#))
        #expect(request.code == "unsupported_scheme", "\(request)")
        #expect(!request.message.contains("precious"))
        let destination = runner.path("copy.bin")
        let download = try failure(step("http.download", #"{ url: "file://\#(victim)", destination: "\#(destination)" }"#))
        #expect(download.code == "unsupported_scheme", "\(download)")
        #expect(!FileManager.default.fileExists(atPath: destination))
    }

    @Test func aRedirectToAnotherProtocolIsRefused() throws {
        let port = server.url.split(separator: ":").last!
        let source = runner.path("up.bin")
        try Tools.randomFile(source, bytes: 10_000)
        for target in ["file://\(victim)", "ftp://127.0.0.1:\(port)/x", "gopher://127.0.0.1:\(port)/x",
                       "dict://127.0.0.1:\(port)/x", "scp://127.0.0.1:\(port)/x"] {
            let scheme = String(target.prefix { $0 != ":" })
            let request = try failure(step("http.request", #"{ url: "\#(redirect(to: target))" }"#))
            #expect(request.code == "redirect_refused", "\(target): \(request)")
            #expect(request.message.contains("redirected (302) to \(target): only http and https redirects are followed, not \(scheme)"),
                    "\(request.message)")
            #expect(!request.message.contains("precious"))

            let destination = runner.path("copy-\(scheme).bin")
            let download = try failure(step("http.download", #"{ url: "\#(redirect(to: target))", destination: "\#(destination)" }"#))
            #expect(download.code == "redirect_refused", "\(target): \(download)")
            #expect(!FileManager.default.fileExists(atPath: destination))

            let upload = try failure(step("http.upload", #"{ url: "\#(redirect(to: target, status: 307))", file: "\#(source)" }"#))
            #expect(upload.code == "redirect_refused", "\(target): \(upload)")
            expectVictimUntouched()
        }
    }

    @Test func aRedirectToAnotherOriginDropsTheStepsHeaders() throws {
        let other = try BadServer()  // another loopback port: another origin
        let headers = #"headers: { X-Api-Key: "k-123", Authorization: "bearer t-456", X-Trace: "t" }"#
        // Same origin (a relative Location): everything is sent again.
        let same = try outputs(step("http.request", #"{ url: "\#(redirect(to: "/echo"))", \#(headers) }"#))
        let sameHeaders = same["json"]?["headers"]
        #expect(sameHeaders?["x-api-key"]?.stringValue == "k-123", "\(same)")
        #expect(sameHeaders?["authorization"]?.stringValue == "bearer t-456")
        #expect(sameHeaders?["x-trace"]?.stringValue == "t")

        // Another port: none of the step's headers, no Authorization; the plugin's own remain.
        let cross = try outputs(step("http.request", #"{ url: "\#(redirect(to: other.url + "/echo"))", \#(headers) }"#))
        let crossHeaders = cross["json"]?["headers"]
        #expect(crossHeaders?["x-api-key"] == nil, "\(cross)")
        #expect(crossHeaders?["authorization"] == nil)
        #expect(crossHeaders?["x-trace"] == nil)
        #expect(crossHeaders?["accept"]?.stringValue == "application/json, */*;q=0.5")
        #expect(crossHeaders?["host"]?.stringValue == other.url.replacingOccurrences(of: "http://", with: ""))

        // A 307 keeps the method and the body (re-sent from the start); a 303 turns it into a GET.
        let post = try outputs(step("http.request", #"{ method: POST, url: "\#(redirect(to: other.url + "/echo", status: 307))", json: { a: 1 }, \#(headers) }"#))
        #expect(post["json"]?["method"]?.stringValue == "POST")
        #expect(post["json"]?["body"]?.stringValue == #"{"a":1}"#, "\(post)")
        #expect(post["json"]?["headers"]?["x-api-key"] == nil)
        let seeOther = try outputs(step("http.request", #"{ method: POST, url: "\#(redirect(to: other.url + "/echo", status: 303))", json: { a: 1 } }"#))
        #expect(seeOther["json"]?["method"]?.stringValue == "GET")
        #expect(seeOther["json"]?["length"]?.intValue == 0)

        // An upload redirected with 307 sends the whole file again, from its first byte.
        let source = runner.path("up.bin")
        try Tools.randomFile(source, bytes: 300_000)
        let upload = try outputs(step("http.upload", #"{ url: "\#(redirect(to: other.url + "/echo", status: 307))", file: "\#(source)", \#(headers) }"#))
        #expect(upload["json"]?["sha256"]?.stringValue == (try Tools.sha256(source)), "\(upload)")
        #expect(upload["json"]?["headers"]?["authorization"] == nil)

        // follow_redirects: false hands the 3xx back (an unexpected status for http.request).
        let notFollowed = try failure(step("http.request", #"{ url: "\#(redirect(to: other.url + "/echo"))", follow_redirects: false }"#))
        #expect(notFollowed.code == "http_302", "\(notFollowed)")
    }

    @Test func redirectsStopAtTheLimit() throws {
        // Eleven hops, each to the next: one more than the limit.
        var target = server.url + "/echo"
        for _ in 0..<11 { target = redirect(to: target) }
        let error = try failure(step("http.request", #"{ url: "\#(target)" }"#))
        #expect(error.code == "too_many_redirects", "\(error)")
        var ten = server.url + "/echo"
        for _ in 0..<10 { ten = redirect(to: ten) }
        #expect(try outputs(step("http.request", #"{ url: "\#(ten)" }"#))["json"]?["method"]?.stringValue == "GET")
    }

    @Test func aRedirectFromHTTPSToHTTPIsRefused() throws {
        let cert = runner.path("cert.pem"), key = runner.path("key.pem")
        let made = try Tools.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                                  "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert])
        guard made.status == 0 else { throw TestFailure("openssl: \(made.stderr)") }
        let nginx = try Nginx(certificate: (cert, key))
        let error = try failure(step("http.request", """
            { url: "\(nginx.base)/redirect?to=\(server.url)/echo", ca_file: "\(cert)", headers: { X-Api-Key: k } }
            """))
        #expect(error.code == "redirect_refused", "\(error)")
        #expect(error.message.contains("a redirect from https to http (a downgrade) would send the request in clear"), "\(error.message)")
        #expect(try server.sent("/echo") == 0, "the plain-http server was asked")
    }
}
