import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The HTTP behaviours of issue 3 that the workflows do not show on their own: a tus 409
/// re-reads the offset, proxies come from the environment as with curl, `max_rate` holds, POST
/// and form bodies arrive as sent, tus chunks share one connection, and tus termination undoes
/// a cancelled upload (workflows/tus-upload.yaml).
@Suite(.serialized) struct HTTPFeatureTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])

    func step(_ uses: String, _ with: String, runner: Runner? = nil) -> String {
        // http.download has no `json` output, and validate refuses an output a step type lacks.
        let output = uses == "http.download" ? "${{ steps.s.outputs }}" : "${{ steps.s.outputs.json }}"
        return (runner ?? self.runner).workflow("""
            version: 1
            name: feature
            steps:
              s:
                uses: \(uses)
                timeout: 60s
                retry: { max_attempts: 2, initial_interval: 10ms }
                with: \(with)
            outputs:
              json: "\(output)"
            """)
    }

    @Test func aTus409ReReadsTheServersOffsetAndContinues() throws {
        let server = try BadServer()
        let size = 2 << 20
        let source = runner.path("a.bin")
        try Tools.randomFile(source, bytes: size)
        // The server answers the second PATCH, then loses that chunk (restored from an older
        // state): the third PATCH, sent at the offset it confirmed, gets 409.
        let path = "/tus/store/a?length=\(size)&forget=1"
        let result = try runner.run(step("http.upload", #"{ url: "\#(server.url)\#(path)", file: "\#(source)", protocol: tus, chunk_size: 524288 }"#))
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        let stored = try server.json(path)
        #expect(stored["conflicts"]?.intValue == 1)
        #expect(stored["offset"]?.intValue == Int64(size))
        #expect(stored["sha256"]?.stringValue == (try Tools.sha256(source)))
        let events = Runner.events(result.stdout)
        #expect(events.ofType("step.retrying").isEmpty, "the 409 was handled inside the attempt")
        let logs = events.ofType("step.log", step: "s").compactMap { $0["data"]?["message"]?.stringValue }
        #expect(logs.contains { $0.contains("409 Conflict at offset 1048576; the server has 524288 bytes") }, "\(logs)")
    }

    /// The tus upload URL is the server's word: one on another origin than the step's url gets
    /// the file but not the step's headers (its API key), as a redirect that leaves the origin;
    /// one that is not http(s) is refused before anything is sent.
    @Test func aTusUploadURLOnAnotherOriginGetsNoneOfTheStepsHeaders() throws {
        let server = try BadServer()
        let size = 1 << 20
        let source = runner.path("t.bin")
        try Tools.randomFile(source, bytes: size)
        // Created at 127.0.0.1; the server answers 201 with an upload URL at localhost.
        let port = try #require(server.url.split(separator: ":").last)
        let elsewhere = "http://localhost:\(port)/tus/store/t?length=\(size)"
        let create = "\(server.url)/redirect?status=201&to=" + (elsewhere.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        let with = #"{ url: "\#(create)", file: "\#(source)", protocol: tus, create: true, headers: { X-Api-Key: k-secret } }"#
        let result = try runner.run(step("http.upload", with))
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        let stored = try server.json("/tus/store/t?length=\(size)")
        #expect(stored["sha256"]?.stringValue == (try Tools.sha256(source)))
        let headers = stored["headers"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(headers.contains("upload-offset") && !headers.contains("x-api-key"), "\(headers)")

        let file = "file:///" + runner.path("victim")
        let refused = try runner.run(step("http.upload", #"{ url: "\#(server.url)/redirect?status=201&to=\#(file)", file: "\#(source)", protocol: tus, create: true }"#))
        #expect(refused.status == 1)
        let failed = Runner.events(refused.stdout).ofType("step.failed", step: "s").last?["data"]
        #expect(failed?["code"]?.stringValue == "tus_protocol", "\(refused.stdout.suffix(2000))")
        #expect(!FileManager.default.fileExists(atPath: runner.path("victim")))
    }

    @Test func proxiesComeFromTheEnvironmentAsWithCurl() throws {
        let nginx = try Nginx()
        try Tools.randomFile("\(nginx.www)/p.bin", bytes: 1 << 20)
        let sha = try Tools.sha256("\(nginx.www)/p.bin")
        // A TCP relay in front of nginx, used as the HTTP proxy: nginx answers the proxy-form
        // request ("GET http://origin.invalid/files/p.bin"). The host does not resolve, so only
        // the proxy can have carried the request.
        let proxy = try FaultProxy(target: "127.0.0.1:\(nginx.port)", seed: 1)
        defer { proxy.stop() }
        let viaProxy = Runner(environment: ["http_proxy": "http://\(proxy.address)"])
        let result = try viaProxy.run(step("http.download", #"{ url: "http://origin.invalid/files/p.bin", destination: "\#(viaProxy.path("p.bin"))" }"#,
                                           runner: viaProxy))
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        #expect(try Tools.sha256(viaProxy.path("p.bin")) == sha)
        #expect(try proxy.stats().connections == 1)

        // no_proxy lists the host: the request goes straight to nginx.
        let bypass = Runner(environment: ["http_proxy": "http://\(proxy.address)", "no_proxy": "127.0.0.1"])
        let direct = try bypass.run(step("http.download", #"{ url: "\#(nginx.base)/files/p.bin", destination: "\#(bypass.path("p.bin"))" }"#,
                                         runner: bypass))
        #expect(direct.status == 0, "\(direct.stdout.suffix(2000))")
        #expect(try proxy.stats().connections == 1, "no_proxy was not honoured")

        // HTTPS_PROXY / https_proxy are for https URLs only; an http URL ignores them.
        let other = Runner(environment: ["HTTPS_PROXY": "http://\(proxy.address)"])
        let plain = try other.run(step("http.download", #"{ url: "\#(nginx.base)/files/p.bin", destination: "\#(other.path("p.bin"))" }"#,
                                       runner: other))
        #expect(plain.status == 0)
        #expect(try proxy.stats().connections == 1)
    }

    @Test func maxRateHoldsDownloadsAndUploads() throws {
        let nginx = try Nginx()
        let size = 3 << 20
        try Tools.randomFile("\(nginx.www)/r.bin", bytes: size)
        var started = Date()
        let down = try runner.run(step("http.download", #"{ url: "\#(nginx.base)/files/r.bin", destination: "\#(runner.path("r.bin"))", max_rate: 1048576 }"#))
        #expect(down.status == 0)
        // 3 MiB at 1 MiB/s: at least ~2 s (a loose lower bound; noise only makes it slower).
        #expect(Date().timeIntervalSince(started) >= 2.0)
        started = Date()
        let up = try runner.run(step("http.upload", #"{ url: "\#(nginx.base)/dav/r.bin", file: "\#(runner.path("r.bin"))", protocol: put, max_rate: 1048576 }"#))
        #expect(up.status == 0, "\(up.stdout.suffix(2000))")
        #expect(Date().timeIntervalSince(started) >= 2.0)
        #expect(try Tools.sha256("\(nginx.dav)/r.bin") == (try Tools.sha256("\(nginx.www)/r.bin")))
    }

    @Test func postAndFormBodiesArriveAsSent() throws {
        let server = try BadServer()
        let source = runner.path("body.bin")
        try Tools.randomFile(source, bytes: 3 << 20)
        let post = try runner.run(step("http.upload", #"{ url: "\#(server.url)/echo", file: "\#(source)", protocol: post, content_type: "video/mp4" }"#))
        #expect(post.status == 0, "\(post.stdout.suffix(2000))")
        let echoed = try #require(Runner.events(post.stdout).runOutputs?["json"])
        #expect(echoed["method"]?.stringValue == "POST")
        #expect(echoed["content_type"]?.stringValue == "video/mp4")
        #expect(echoed["length"]?.intValue == 3 << 20)
        #expect(echoed["sha256"]?.stringValue == (try Tools.sha256(source)))

        let form = try runner.run(step("http.request", #"{ method: POST, url: "\#(server.url)/echo", form: { name: "a b", note: "ü&=?", n: 3 } }"#))
        #expect(form.status == 0, "\(form.stdout.suffix(2000))")
        let formEcho = try #require(Runner.events(form.stdout).runOutputs?["json"])
        #expect(formEcho["content_type"]?.stringValue == "application/x-www-form-urlencoded")
        #expect(formEcho["body"]?.stringValue == "n=3&name=a%20b&note=%C3%BC%26%3D%3F")

        let text = try runner.run(step("http.request", #"{ method: PUT, url: "\#(server.url)/echo", body: "plain text", headers: { Content-Type: text/plain } }"#))
        let textEcho = try #require(Runner.events(text.stdout).runOutputs?["json"])
        #expect(textEcho["method"]?.stringValue == "PUT")
        #expect(textEcho["body"]?.stringValue == "plain text")
        #expect(textEcho["content_type"]?.stringValue == "text/plain")
    }

    @Test func tusChunksAndStreamingVerifiesReuseOneConnection() throws {
        let sandbox = try Sandbox()
        let proxy = try FaultProxy(target: String(sandbox.url.dropFirst("http://".count)), seed: 1)
        defer { proxy.stop() }
        let size = 4 << 20
        let source = runner.path("c.bin")
        try Tools.randomFile(source, bytes: size)
        for approach in ["tus", "streaming"] {
            try proxy.resetStats()
            let created = try Tools.run(["curl", "-sS", "-X", "POST", "-H", "Authorization: bearer \(Sandbox.token)",
                                         "--data", #"{"upload":{"approach":"\#(approach)","size":\#(size)}}"#, "\(sandbox.url)/me/videos"])
            let link = try #require(try JSONValue(parsing: created.stdout)["upload"]?["upload_link"]?.stringValue)
                .replacingOccurrences(of: sandbox.url, with: "http://\(proxy.address)")
            let protocolName = approach == "tus" ? "tus" : "vimeo-streaming"
            let result = try runner.run(step("http.upload", #"{ url: "\#(link)", file: "\#(source)", protocol: \#(protocolName), chunk_size: 524288 }"#))
            #expect(result.status == 0, "\(result.stdout.suffix(2000))")
            // tus: HEAD + 8 PATCHes; streaming: verify, PUT, verify. One connection each.
            let stats = try proxy.stats()
            #expect(stats.connections == 1, "\(approach): \(stats)")
        }
    }

    @Test func tusTerminationDeletesTheUploadOfACancelledRun() throws {
        let sandbox = try Sandbox()
        let size = 16 << 20
        let source = runner.path("t.bin")
        try Tools.randomFile(source, bytes: size)
        let finished = try runner.run(Runner.workflow("tus-upload.yaml"), ["source": source, "endpoint": "\(sandbox.url)/tus",
                                                                          "chunk_size": "\(size / 4)"])
        #expect(finished.status == 0, "\(finished.stdout.suffix(2000))")
        let link = try #require(Runner.events(finished.stdout).runOutputs?["upload_url"]?.stringValue)
        #expect(link.hasPrefix("\(sandbox.url)/upload/"))
        let done = try #require(try sandbox.videos().last)
        #expect(try Tools.sha256(sandbox.videoFile(done["uri"]!.stringValue!)) == (try Tools.sha256(source)))
        #expect(done["deleted"]?.boolValue == false)

        let process = try runner.start(Runner.workflow("tus-upload.yaml"), ["source": source, "endpoint": "\(sandbox.url)/tus",
                                                                           "chunk_size": "\(size / 4)", "max_rate": "\(size / 8)"])
        let uploading = Tools.waitFor(30) { (try? sandbox.videos().count) == 2 && ((try? sandbox.videos().last?["received"]?.intValue) ?? 0) > 0 }
        #expect(uploading)
        // Ctrl-C interrupts and undoes nothing; `cancel` of the interrupted run, whose process is
        // gone, runs the compensations itself.
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130)
        #expect(try sandbox.videos().last?["deleted"]?.boolValue == false, "an interrupt undoes nothing")
        let run = try #require(try runner.runIDs().last)
        let cancel = try runner.orchestrate(["cancel", run])
        #expect(cancel.status == 0, "\(cancel.stderr)")
        let cancelled = try #require(try sandbox.videos().last)
        #expect(cancelled["deleted"]?.boolValue == true, "\(cancelled)")
        #expect((cancelled["received"]?.intValue ?? 0) < Int64(size))
        let events = Runner.events(try runner.orchestrate(["events", run]).stdout)
        #expect(!events.ofType("step.succeeded", step: "compensate:create").isEmpty, "\(events.suffix(5))")
    }
}
