import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The HTTP fault campaign (issue 6): transfers through tools/faultproxy.py, which drops,
/// resets and stalls connections at seeded random offsets. Every transfer ends byte-identical
/// (sha256) or fails with a clear error after its attempts; none hangs (a stall is ended by the
/// low-speed abort); a failed download leaves only its partial file, a prefix of the source.
/// ORCHESTRATE_FAULT_SEED and ORCHESTRATE_FAULT_MIB change the seed and the size; bench/faults
/// runs the long campaign.
@Suite(.serialized) struct FaultCampaignTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])
    static let seed = Int(ProcessInfo.processInfo.environment["ORCHESTRATE_FAULT_SEED"] ?? "") ?? 92  // a seed whose plan has stalls as well as cuts
    static let size = (Int(ProcessInfo.processInfo.environment["ORCHESTRATE_FAULT_MIB"] ?? "") ?? 24) << 20

    /// Every stretch of up to half the file: a cut (FIN or RST) with odds 0.3 each, a one-minute
    /// stall (only the low-speed abort can end it) with odds 0.2, else nothing and a new draw
    /// (so kept-alive upload connections meet faults too); at most `maxFaults` in all.
    static let faults = FaultProxy.Direction(drop: 0.3, reset: 0.3, stall: 0.2, stallMilliseconds: 60_000, after: 0...(size / 2),
                                             repeats: true)
    static let maxFaults = 6

    /// A one-step workflow with retries that outlast `maxFaults`, and the low-speed abort.
    func workflow(_ uses: String, _ with: String, attempts: Int = 12) -> String {
        runner.workflow("""
            version: 1
            name: campaign
            steps:
              t:
                uses: \(uses)
                timeout: 2m
                retry: { max_attempts: \(attempts), initial_interval: 10ms, backoff: 1.0 }
                with: \(with)
            """)
    }

    /// Runs it; checks it ended within its bound and every retry was a transport error or the
    /// low-speed timeout. Returns the events.
    func run(_ file: String, proxy: FaultProxy, expectSuccess: Bool = true) throws -> [JSONValue] {
        let started = Date()
        let result = try runner.run(file)
        let elapsed = Date().timeIntervalSince(started)
        let events = Runner.events(result.stdout)
        let stats = try proxy.stats()
        let retries = events.ofType("step.retrying", step: "t")
        print("fault campaign (seed \(Self.seed)): \(stats); \(retries.count) retries; \(String(format: "%.1f", elapsed)) s")
        #expect((result.status == 0) == expectSuccess, "\(result.stdout.suffix(3000))")
        #expect(elapsed < 120, "the campaign took \(elapsed) s")
        for retry in retries {
            let code = retry["data"]?["code"]?.stringValue ?? ""
            #expect(code.hasPrefix("curl_") || code == "timeout" || code == "short_body" || code == "http_409", "\(retry)")
        }
        return events
    }

    @Test func aDownloadFromNginxThroughDropsResetsAndStallsIsByteIdentical() throws {
        let nginx = try Nginx()
        try Tools.randomFile("\(nginx.www)/big.bin", bytes: Self.size)
        let sha = try Tools.sha256("\(nginx.www)/big.bin")
        let proxy = try FaultProxy(target: "127.0.0.1:\(nginx.port)", seed: Self.seed, down: Self.faults, maxFaults: Self.maxFaults)
        defer { proxy.stop() }
        let destination = runner.path("big.bin")
        let events = try run(workflow("http.download", #"""
            { url: "http://\#(proxy.address)/files/big.bin", destination: "\#(destination)", sha256: "\#(sha)", min_speed: 100000, min_speed_time: 2 }
            """#), proxy: proxy)
        #expect(try Tools.sha256(destination) == sha)
        #expect(!FileManager.default.fileExists(atPath: runner.path(".big.bin.part")))
        let stats = try proxy.stats()
        #expect(stats.faults >= 1, "\(stats)")
        #expect(!events.ofType("step.retrying", step: "t").isEmpty)
        // Resumed with Range after the cuts, not started over.
        #expect(nginx.accessLog.contains { $0.contains(" 206 ") }, "\(nginx.accessLog)")
    }

    @Test func aDownloadThatRunsOutOfAttemptsFailsClearlyAndLeavesNoPartial() throws {
        let nginx = try Nginx()
        let size = 8 << 20
        try Tools.randomFile("\(nginx.www)/cut.bin", bytes: size)
        // Every connection is cut after 1-2 MiB: three attempts cannot finish 8 MiB.
        let proxy = try FaultProxy(target: "127.0.0.1:\(nginx.port)", seed: Self.seed, down: .init(drop: 1, after: (1 << 20)...(2 << 20)))
        defer { proxy.stop() }
        let destination = runner.path("cut.bin")
        let events = try run(workflow("http.download", #"{ url: "http://\#(proxy.address)/files/cut.bin", destination: "\#(destination)" }"#,
                                      attempts: 3), proxy: proxy, expectSuccess: false)
        let failed = try #require(events.ofType("step.failed", step: "t").last)
        #expect(failed["data"]?["code"]?.stringValue == "curl_18", "\(failed)")
        #expect(failed["data"]?["error"]?.stringValue?.contains("cut.bin") == true, "\(failed)")
        #expect(events.ofType("step.retrying", step: "t").count == 2)
        #expect(!FileManager.default.fileExists(atPath: destination), "an incomplete download reached its destination")
        // The step failed for good: nothing can resume its partial file any more, so it is gone
        // (while attempts remained it was kept and resumed: the retries above).
        #expect(!FileManager.default.fileExists(atPath: runner.path(".cut.bin.part")), "a partial nothing can resume was left")
    }

    /// Creates a video of `approach` on the sandbox and returns its upload link, rewritten to go
    /// through `proxy`.
    func uploadLink(_ sandbox: Sandbox, approach: String, size: Int, through proxy: FaultProxy) throws -> (link: String, uri: String) {
        let created = try Tools.run(["curl", "-sS", "-X", "POST", "-H", "Authorization: bearer \(Sandbox.token)",
                                     "--data", #"{"upload":{"approach":"\#(approach)","size":\#(size)}}"#, "\(sandbox.url)/me/videos"])
        let json = try JSONValue(parsing: created.stdout)
        let link = try #require(json["upload"]?["upload_link"]?.stringValue)
        let uri = try #require(json["uri"]?.stringValue)
        return (link.replacingOccurrences(of: sandbox.url, with: "http://\(proxy.address)"), uri)
    }

    func upload(approach: String, protocolName: String, extra: String = "") throws {
        let sandbox = try Sandbox()
        let proxy = try FaultProxy(target: String(sandbox.url.dropFirst("http://".count)), seed: Self.seed, up: Self.faults,
                                   maxFaults: Self.maxFaults)
        defer { proxy.stop() }
        let source = runner.path("video.mp4")
        try Tools.randomFile(source, bytes: Self.size)
        let (link, uri) = try uploadLink(sandbox, approach: approach, size: Self.size, through: proxy)
        let events = try run(workflow("http.upload", #"""
            { url: "\#(link)", file: "\#(source)", protocol: \#(protocolName), min_speed: 100000, min_speed_time: 2\#(extra) }
            """#), proxy: proxy)
        #expect(try Tools.sha256(sandbox.videoFile(uri)) == (try Tools.sha256(source)))
        let video = try #require(try sandbox.video(uri))
        #expect(video["received"]?.intValue == Int64(Self.size))
        let stats = try proxy.stats()
        #expect(stats.faults >= 1, "\(stats)")
        let resent = (video["bytes_received_total"]?.intValue ?? 0) - Int64(Self.size)
        print("\(protocolName): \(resent) bytes received again after the faults")
        let recovered = events.ofType("step.retrying", step: "t").count
            + events.ofType("step.log", step: "t").filter { $0["data"]?["message"]?.stringValue?.contains("409 Conflict") == true }.count
        #expect(recovered >= 1)
    }

    @Test func aVimeoStreamingUploadThroughFaultsIsByteIdentical() throws {
        try upload(approach: "streaming", protocolName: "vimeo-streaming")
    }

    @Test func aTusUploadThroughFaultsIsByteIdentical() throws {
        try upload(approach: "tus", protocolName: "tus", extra: ", chunk_size: \(Self.size / 6)")
    }
}
