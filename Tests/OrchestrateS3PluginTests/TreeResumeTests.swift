import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// kill -9 in the middle of a tree, then `resume`: the files journaled as finished are not sent
/// (or fetched) again; at most the ones in flight at the kill are.
@Suite(.serialized) struct TreeResumeTests {
    static let count = 40
    static let size = 40_000

    /// moto's request log: how many times `method` on each key under `prefix` was answered `status`.
    static func requests(_ peer: S3Peer, _ method: String, prefix: String, status: Int) -> [String: Int] {
        var counts: [String: Int] = [:]
        let marker = "\"\(method) /orc-bucket/\(prefix)"
        for line in peer.serverLog.split(separator: "\n") where line.contains(marker) && line.contains("\" \(status) ") {
            guard let start = line.range(of: marker) else { continue }
            let key = line[start.upperBound...].prefix { $0 != " " && $0 != "?" }
            counts[String(key), default: 0] += 1
        }
        return counts
    }

    func makeFolder(_ runner: S3Runner) throws -> String {
        let root = runner.path("tree")
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        for i in 0 ..< Self.count { try Tools.randomFile(root + (i % 2 == 0 ? "/f\(i)" : "/sub/f\(i)"), bytes: Self.size) }
        return root
    }

    func killAndResume(_ runner: S3Runner, _ file: String, until: () -> Bool) throws -> ProcessResult {
        let child = try runner.start(file)
        let reached = Tools.waitFor(60, until)
        kill(child.pid, SIGKILL)
        _ = child.wait(timeout: 10)
        #expect(reached)
        let run = try #require(try runner.runIDs().last)
        return try runner.orchestrate(["resume", run, "--json"])
    }

    @Test func killNineMidTreeUploadThenResumeSendsNoFinishedFileAgain() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let root = try makeFolder(runner)
        let file = runner.workflow(TransferTests.workflow(peer, """
              up:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, source: "\(root)", prefix: "t/", concurrency: 2, max_rate: 200000 }
            """))
        let resumed = try killAndResume(runner, file) { Self.requests(peer, "PUT", prefix: "t/", status: 200).count >= 10 }
        #expect(resumed.status == 0, "\(TransferTests.check(resumed))")
        let puts = Self.requests(peer, "PUT", prefix: "t/", status: 200)
        #expect(puts.count == Self.count, "\(puts)")
        // Only the files in flight at the kill (2) may have gone twice.
        let twice = puts.values.filter { $0 > 1 }.count
        #expect(twice <= 2 && puts.values.allSatisfy { $0 <= 2 }, "\(puts)")
        let outputs = try runner.stepOutputs("up")
        #expect((outputs?["files_resumed"]?.intValue ?? 0) >= 8, "\(String(describing: outputs))")
        #expect(outputs?["files"]?.intValue == Int64(Self.count))
        let cli = runner.path("cli.bin")
        #expect(try peer.aws(["s3api", "get-object", "--bucket", "orc-bucket", "--key", "t/sub/f39", cli]).status == 0)
        #expect(Tools.sameBytes(cli, root + "/sub/f39"))
    }

    @Test func killNineMidTreeDownloadThenResumeFetchesNoFinishedFileAgain() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let root = try makeFolder(runner)
        let sync = try peer.aws(["s3", "cp", "--recursive", root, "s3://orc-bucket/t/"])
        #expect(sync.status == 0, "\(sync.stderr)")
        let back = runner.path("back")
        let file = runner.workflow(TransferTests.workflow(peer, """
              get:
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, prefix: "t/", destination: "\(back)", concurrency: 2, max_rate: 200000 }
            """))
        let resumed = try killAndResume(runner, file) { Self.requests(peer, "GET", prefix: "t/", status: 200).count >= 10 }
        #expect(resumed.status == 0, "\(TransferTests.check(resumed))")
        let gets = Self.requests(peer, "GET", prefix: "t/", status: 200)
        #expect(gets.count == Self.count, "\(gets)")
        // Fetched twice: the 2 in flight at the kill, and those fetched and verified whose commit
        // (fsync, rename, then the checkpoint) had not ended: on a loaded disk, one or two more.
        #expect(gets.values.filter { $0 > 1 }.count <= 4 && gets.values.allSatisfy { $0 <= 2 }, "\(gets)")
        #expect((try runner.stepOutputs("get")?["files_resumed"]?.intValue ?? 0) >= 8)
        for i in 0 ..< Self.count {
            let relative = i % 2 == 0 ? "f\(i)" : "sub/f\(i)"
            #expect(Tools.sameBytes(back + "/" + relative, root + "/" + relative), "\(relative)")
        }
        // No partial file left behind.
        let leftovers = (FileManager.default.enumerator(atPath: back)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".part") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }
}
