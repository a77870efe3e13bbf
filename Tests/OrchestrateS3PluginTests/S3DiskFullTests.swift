import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// s3.download of a CRC-checked object (its chunks written by writer threads, with O_DIRECT on
/// a tmpfs of Linux 6.6 or later, through the page cache before) onto a real full disk: a 4 MiB
/// tmpfs (mounting needs root, as CI runs). The step's next attempt keeps the ranges that were
/// journaled (read back to be hashed); the last fails with a clear no-space error instead of
/// hanging or crashing, nothing takes the destination's name, the partial file is removed (its
/// space given back), and once the disk is bigger `retry` finishes byte-identical.
@Suite(.serialized) struct S3DiskFullTests {
    @Test func aDownloadOntoAFullDiskFailsClearlyAndRetryFinishesIt() throws {
        guard getuid() == 0 else {
            Issue.record("mounting a small tmpfs needs root: run the suite as root (CI does)")
            return
        }
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 12 * (1 << 20) + 100)
        try FaultTests.put(source, to: peer, checkedBy: "crc64nvme")
        let small = try SmallDisk(runner.path("disk"), size: "4m")
        defer { small.unmount() }
        let disk = small.path
        let destination = "\(disk)/big.bin"
        let file = runner.workflow(TransferTests.workflow(peer, """
              get:
                uses: s3.download
                retry: { max_attempts: 2, initial_interval: 10ms }
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: big.bin, destination: "\(destination)", part_size: 1048576,
                        concurrency: 2 }
            """))
        let result = try runner.run(file)
        #expect(result.status == 1, "\(TransferTests.check(result))")
        #expect(!result.signalled)
        let failed = try #require(S3Runner.events(result.stdout).ofType("step.failed", step: "get").last, "\(TransferTests.check(result))")
        #expect(failed["data"]?["code"]?.stringValue == "ENOSPC", "a clear no-space error: \(failed)")
        // "resuming s3://orc-bucket/big.bin: N of 13 ranges already on disk", N > 0.
        let resumed = S3Runner.events(result.stdout).ofType("step.log", step: "get").compactMap { $0["data"]?["message"]?.stringValue }
            .first { $0.hasPrefix("resuming ") }
        let kept = resumed.flatMap { Int($0.split(separator: " ").dropFirst(2).first ?? "") } ?? 0
        #expect(kept >= 1, "the second attempt kept the ranges journaled: \(String(describing: resumed))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk).isEmpty, "the partial file gives its space back")

        try small.resize("32m")
        let run = try #require(try runner.runIDs().last)
        let again = try runner.orchestrate(["retry", run, "--json"])
        #expect(again.status == 0, "\(TransferTests.check(again))")
        #expect(Tools.sameBytes(destination, source))
        let outputs = try runner.stepOutputs("get")
        #expect(outputs?["verified"]?.stringValue == "crc64nvme", "\(String(describing: outputs))")
        let left = try FileManager.default.contentsOfDirectory(atPath: disk).filter { $0 != "big.bin" }
        #expect(left.isEmpty, "left behind: \(left)")
    }
}
