import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Connections reset at random byte offsets (tools/faultproxy.py between orchestrate and
/// moto_server), and a download killed with -9: the retries and the resume reconcile with the
/// server, so no part is received twice and the bytes arrive whole.
@Suite(.serialized) struct FaultTests {
    static let mib = 1 << 20

    /// Answers cut (a part the server took whose 200 never arrived, a complete that happened
    /// but was not heard) and bodies cut: no confirmed part is sent again.
    @Test(arguments: [1, 2]) func resetsDuringUploadAndDownload(seed: Int) throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let proxy = try FaultProxy(target: "127.0.0.1:\(peer.port)", seed: seed,
                                   up: .init(reset: 0.15, after: 0...(6 << 20)), down: .init(reset: 0.3, after: 0...2000))
        let runner = S3Runner()
        let source = runner.path("big.bin")
        try Tools.randomFile(source, bytes: 26 * Self.mib + 5)  // 6 parts
        let file = runner.workflow("""
            version: 1
            name: s3-faults
            defaults:
              retry: { max_attempts: 60, initial_interval: 20ms, max_interval: 200ms }
            steps:
              up:
                uses: s3.upload
                with: { endpoint: "http://\(proxy.address)", bucket: orc-bucket, key: big.bin, source: "\(source)",
                        multipart_threshold: 5242880, part_size: 5242880, concurrency: 3 }
              get:
                needs: [up]
                uses: s3.download
                with: { endpoint: "http://\(proxy.address)", bucket: orc-bucket, key: big.bin, destination: "\(runner.path("back.bin"))",
                        part_size: 2097152, concurrency: 3 }
            """)
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        let stats = try proxy.stats()
        #expect(stats.faults > 0, "no fault was injected: \(stats)")
        let received = peer.partsReceived()
        #expect(received.keys.sorted() == Array(1 ... 6), "\(received)")
        // A part whose answer was cut is adopted from ListParts, never sent again. A part still in
        // flight when a sibling's failure ends the attempt is not confirmed yet and may be sent
        // once more (at most the parts in flight, 3, per injected fault), never the whole upload.
        let resent = received.values.reduce(0, +) - received.count
        #expect(resent <= 3 * stats.faults, "parts re-sent beyond those in flight at the faults: \(received), \(stats)")
        #expect(try peer.openUploads("orc-bucket").isEmpty)
        #expect(Tools.sameBytes(runner.path("back.bin"), source))
        let cli = runner.path("cli.bin")
        #expect(try peer.aws(["s3api", "get-object", "--bucket", "orc-bucket", "--key", "big.bin", cli]).status == 0)
        #expect(Tools.sameBytes(cli, source))
    }

    /// Puts `source` as `big.bin`, checked on download by its single-part ETag (`md5`: the file is
    /// read back to be hashed) or by a CRC-64 in its metadata (`crc64nvme`: each chunk hashed as it
    /// is written, the ranges resumed read back).
    static func put(_ source: String, to peer: S3Peer, checkedBy check: String) throws {
        var arguments = ["s3api", "put-object", "--bucket", "orc-bucket", "--key", "big.bin", "--body", source]
        if check == "crc64nvme" { arguments += ["--metadata", "crc64nvme=\(try VerifyTests.crc64(source))"] }
        #expect(try peer.aws(arguments).status == 0)
    }

    /// One GET asks for several journaled ranges (fewer requests for the server); when its body is
    /// cut, the ranges that came whole before the cut are kept and only the rest is fetched again.
    @Test(arguments: ["md5", "crc64nvme"]) func aGETCutMidwayKeepsTheRangesThatCameWhole(checkedBy check: String) throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 32 * Self.mib)  // 32 ranges of 1 MiB, asked 16 at a time
        try Self.put(source, to: peer, checkedBy: check)
        // One reset, 10.5 MiB into the answers of the first connection (the HEAD's few hundred
        // bytes, then the first GET's).
        let cut = 10 * Self.mib + Self.mib / 2
        let proxy = try FaultProxy(target: "127.0.0.1:\(peer.port)", seed: 1, down: .init(reset: 1, after: cut...cut), maxFaults: 1)
        let destination = runner.path("big.bin")
        let file = runner.workflow("""
            version: 1
            name: s3-cut-get
            steps:
              get:
                uses: s3.download
                retry: { max_attempts: 3, initial_interval: 20ms }
                with: { endpoint: "http://\(proxy.address)", bucket: orc-bucket, key: big.bin, destination: "\(destination)",
                        part_size: 1048576, concurrency: 1 }
            """)
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        #expect(Tools.sameBytes(destination, source))
        let stats = try proxy.stats()
        #expect(stats.resets == 1, "\(stats)")
        // GETs of up to 16 ranges: the one cut (logged or not), then ranges 10-25 and 26-31.
        let gets = peer.serverLog.components(separatedBy: "\"GET /orc-bucket/big.bin HTTP/1.1\" 206").count - 1
        #expect((2 ... 3).contains(gets), "\(gets) ranged GETs")
        // The reset also throws away what sat unread in the client's socket buffer (a few MiB on
        // loopback), so fewer than ten ranges reach the file; each of those is kept all the same,
        // where a GET journaled only once whole would have kept none.
        let outputs = try runner.stepOutputs("get")
        let kept = outputs?["ranges_resumed"]?.intValue ?? 0
        #expect(kept >= 5, "\(String(describing: outputs))")
        #expect(outputs?["verified"]?.stringValue == check)
        // After the cut, only the ranges not kept were fetched.
        #expect(stats.bytesDown <= cut + (32 - Int(kept)) * Self.mib + 64 * 1024, "\(stats), \(kept) ranges kept")
    }

    /// kill -9 in the middle of a ranged download, then resume: the ranges on disk are kept.
    @Test(arguments: ["md5", "crc64nvme"]) func killNineMidDownloadThenResumeKeepsTheRangesOnDisk(checkedBy check: String) throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 40 * Self.mib)  // 10 ranges of 4 MiB
        try Self.put(source, to: peer, checkedBy: check)
        let destination = runner.path("out/big.bin")
        let file = runner.workflow(TransferTests.workflow(peer, """
              get:
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: big.bin, destination: "\(destination)", part_size: 4194304,
                        concurrency: 2, max_rate: 6291456 }
            """))
        let child = try runner.start(file)
        let ranges = { peer.serverLog.components(separatedBy: "\"GET /orc-bucket/big.bin HTTP/1.1\" 206").count - 1 }
        let reached = Tools.waitFor(60) { ranges() >= 4 }
        kill(child.pid, SIGKILL)
        _ = child.wait(timeout: 10)
        #expect(reached)
        #expect(!FileManager.default.fileExists(atPath: destination), "the download finished before the kill")
        let run = try #require(try runner.runIDs().last)
        let resumed = try runner.orchestrate(["resume", run, "--json"])
        #expect(resumed.status == 0, "\(TransferTests.check(resumed))")
        #expect(Tools.sameBytes(destination, source))
        let outputs = try runner.stepOutputs("get")
        #expect((outputs?["ranges_resumed"]?.intValue ?? 0) >= 2, "\(String(describing: outputs))")
        // At most the two ranges in flight at the kill are fetched again.
        #expect(ranges() <= 12, "\(ranges()) ranged GETs for 10 ranges")
        #expect(outputs?["verified"]?.stringValue == check)
    }
}

/// The answer to CompleteMultipartUpload lost after the server completed the upload
/// (tools/s3_lost_answer_proxy.py): the retry recognises the finished object instead of
/// failing on NoSuchUpload or uploading again.
@Suite struct LostCompleteTests {
    @Test func aCompleteWhoseAnswerWasLostIsRecognised() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let proxy = try ScriptedServer("s3_lost_answer_proxy.py", ["--target", "127.0.0.1:\(peer.port)", "--lose", "^POST [^?]*\\?uploadId=",
                                                                 "--then-no-such-upload"])
        let address = proxy.address

        let runner = S3Runner()
        let source = runner.path("big.bin")
        try Tools.randomFile(source, bytes: 11 << 20)  // 3 parts
        let file = runner.workflow("""
            version: 1
            name: s3-lost-complete
            steps:
              up:
                uses: s3.upload
                retry: { max_attempts: 3, initial_interval: 20ms }
                with: { endpoint: "http://\(address)", bucket: orc-bucket, key: big.bin, source: "\(source)",
                        multipart_threshold: 5242880, part_size: 5242880 }
            """)
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        let events = S3Runner.events(result.stdout)
        // The complete is sent again (by libcurl on a new connection, or by the next attempt) and
        // meets NoSuchUpload: the object is recognised by its ETag, size and SHA-256.
        let logs = events.ofType("step.log", step: "up").compactMap { $0["data"]?["message"]?.stringValue }
        #expect(logs.contains { $0.contains("the upload was already completed") || $0.contains("was completed before the restart") }, "\(logs)")
        let received = peer.partsReceived()
        #expect(received == [1: 1, 2: 1, 3: 1], "\(received)")
        #expect(try peer.openUploads("orc-bucket").isEmpty)
        let cli = runner.path("cli.bin")
        #expect(try peer.aws(["s3api", "get-object", "--bucket", "orc-bucket", "--key", "big.bin", cli]).status == 0)
        #expect(Tools.sameBytes(cli, source))
    }
}
