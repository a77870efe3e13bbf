import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Servers that lie or never stop (tools/badserver.py): each is a clear error, nothing corrupt
/// is left behind, and the client stops reading early (memory stays bounded; the server's own
/// count of bytes sent shows it).
@Suite(.serialized) struct MaliciousServerTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])
    let server: BadServer

    init() throws { server = try BadServer() }

    func step(_ uses: String, _ with: String, attempts: Int = 1) -> String {
        runner.workflow("""
            version: 1
            name: bad
            steps:
              s:
                uses: \(uses)
                timeout: 60s
                retry: { max_attempts: \(attempts), initial_interval: 10ms }
                with: \(with)
            """)
    }

    /// Runs the workflow, expects it to fail, and returns the step's final error (code, message).
    func failure(_ file: String) throws -> (code: String, message: String, retries: Int) {
        let result = try runner.run(file)
        #expect(result.status == 1, "\(result.stdout.suffix(2000))")
        let events = Runner.events(result.stdout)
        let failed = try #require(events.ofType("step.failed", step: "s").last, "\(result.stdout.suffix(2000))")
        return (failed["data"]?["code"]?.stringValue ?? "", failed["data"]?["error"]?.stringValue ?? "",
                events.ofType("step.retrying", step: "s").count)
    }

    @Test func a206WithAnotherRangeThanAskedIsRefusedAndNothingOfItIsWritten() throws {
        let destination = runner.path("wrong.bin")
        // Attempt 1: the whole file is announced, half arrives (a cut). Attempt 2 resumes with
        // Range: bytes=524288- and gets "206 bytes 525288-...": refused, the partial discarded.
        let error = try failure(step("http.download", #"{ url: "\#(server.url)/range/wrong", destination: "\#(destination)" }"#, attempts: 2))
        #expect(error.code == "bad_content_range", "\(error)")
        #expect(error.message.contains("asked for bytes 524288- but the server answered 206 with Content-Range: bytes 525288-"), "\(error.message)")
        #expect(!FileManager.default.fileExists(atPath: destination))
        #expect(Tools.size(runner.path(".wrong.bin.part")) <= 0, "bytes of the wrong range were kept")
        // The same server's honest file downloads fine (the refusal is about the lie, not the client).
        let honest = runner.path("honest.bin")
        let ok = try runner.run(step("http.download", #"{ url: "\#(server.url)/range/file", destination: "\#(honest)" }"#))
        #expect(ok.status == 0)
        #expect(Tools.size(honest) == 1 << 20)
    }

    /// A server that takes the request and answers nothing is dead after min_speed_time (the
    /// default min_speed is 1 byte/s): the step fails with a timeout instead of waiting forever.
    @Test func aServerThatGoesSilentIsGivenUpOnByDefault() throws {
        let started = Date()
        let error = try failure(step("http.download", #"{ url: "\#(server.url)/silent", destination: "\#(runner.path("silent.bin"))", min_speed_time: 2 }"#))
        #expect(error.code == "timeout" && error.message.contains("too slow or no answer"), "\(error)")
        #expect(Date().timeIntervalSince(started) < 30)
    }

    @Test func anEndlessHeaderIsCutOffWithAClearError() throws {
        for path in ["/endless-header", "/endless-header-line"] {
            let error = try failure(step("http.request", #"{ url: "\#(server.url)\#(path)" }"#, attempts: 3))
            #expect(error.code == "headers_too_large", "\(path): \(error)")
            #expect(error.message.contains("header"), "\(error.message)")
            #expect(error.retries == 0, "a hostile header is not retried")
            // libcurl and the plugin stop at a few hundred KiB; loopback buffers add a few MiB.
            #expect(try server.sent(path) < 16 << 20, "\(path): the client kept reading")
        }
    }

    @Test func aHugeJSONBodyFailsPastMaxBodyWithoutBeingRead() throws {
        let error = try failure(step("http.request", #"{ url: "\#(server.url)/huge-json?mib=1024" }"#))
        #expect(error.code == "body_too_large", "\(error)")
        #expect(error.message.contains("max_body (1048576 bytes)"), "\(error.message)")
        // Of the 1 GiB announced, only what fits in socket buffers was sent before the close.
        #expect(try server.sent("/huge-json") < 64 << 20)
    }

    @Test func maxSizeStopsAnEndlessBodyAndLeavesNothingBehind() throws {
        let destination = runner.path("endless.bin")
        let endless = try failure(step("http.download", #"{ url: "\#(server.url)/endless", destination: "\#(destination)", max_size: 1M }"#,
                                       attempts: 3))
        #expect(endless.code == "too_large", "\(endless)")
        #expect(endless.message.contains("/endless sent more than 1048576 bytes, more than max_size (1048576 bytes); the partial file was deleted"),
                "\(endless.message)")
        #expect(endless.retries == 0, "a body past max_size is not retried")
        #expect(!FileManager.default.fileExists(atPath: destination))
        #expect(!FileManager.default.fileExists(atPath: runner.path(".endless.bin.part")), "the partial file was left behind")
        #expect(try server.sent("/endless") < 64 << 20, "the client kept reading")

        // An announced length past max_size is refused before any byte is written.
        let announced = try failure(step("http.download", #"{ url: "\#(server.url)/huge-json?mib=1024", destination: "\#(destination)", max_size: 10M }"#))
        #expect(announced.code == "too_large", "\(announced)")
        #expect(announced.message.contains("announces 1073741824 bytes, more than max_size (10485760 bytes)"), "\(announced.message)")
        #expect(!FileManager.default.fileExists(atPath: runner.path(".endless.bin.part")))
        #expect(try server.sent("/huge-json") < 64 << 20)

        // A file of exactly max_size downloads.
        let ok = try runner.run(step("http.download", #"{ url: "\#(server.url)/range/file", destination: "\#(destination)", max_size: 1048576 }"#))
        #expect(ok.status == 0, "\(ok.stdout.suffix(2000))")
        #expect(Tools.size(destination) == 1 << 20)
    }

    @Test func aDestinationNamingADirectoryIsRefused() throws {
        let existing = runner.path("existing")
        try FileManager.default.createDirectory(atPath: existing, withIntermediateDirectories: true)
        for destination in [runner.path("new") + "/", existing + "/", existing, existing + "/.."] {
            let error = try failure(step("http.download", #"{ url: "\#(server.url)/range/file", destination: "\#(destination)" }"#))
            #expect(error.code == "bad_destination", "\(destination): \(error)")
            #expect(error.message.contains("destination \(destination)"), "\(error.message)")
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: runner.dir.path).filter { $0.hasSuffix(".part") }
        #expect(left.isEmpty, "partial files left: \(left)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: existing).isEmpty)
    }

    func tusFailure(_ path: String) throws -> (code: String, message: String, retries: Int) {
        let source = runner.path("tus.bin")
        try Tools.randomFile(source, bytes: 1 << 20)
        return try failure(step("http.upload",
                                #"{ url: "\#(server.url)\#(path)?length=1048576", file: "\#(source)", protocol: tus, chunk_size: 262144 }"#,
                                attempts: 3))
    }

    @Test func aTusOffsetThatJumpsBackwardsOrPastTheSizeIsAProtocolError() throws {
        let backwards = try tusFailure("/tus/backwards")
        #expect(backwards.code == "tus_protocol")
        #expect(backwards.message.contains("offset went backwards: PATCH at 262144 answered Upload-Offset 261144"), "\(backwards.message)")
        #expect(backwards.retries == 0)

        let past = try tusFailure("/tus/past-size")
        #expect(past.code == "tus_protocol")
        #expect(past.message.contains("past what was sent"), "\(past.message)")

        let head = try tusFailure("/tus/head-past-size")
        #expect(head.code == "tus_protocol")
        #expect(head.message.contains("claims Upload-Offset 1052672 for a 1048576-byte file"), "\(head.message)")
    }
}
