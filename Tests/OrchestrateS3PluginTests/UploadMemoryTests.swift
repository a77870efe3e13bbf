import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// What one process keeps of the multipart uploads it finished: nothing. `serve` runs uploads
/// for months, so an upload that left a megabyte behind (its part hasher's read buffer) would
/// add up to gigabytes.
@Suite struct UploadMemoryTests {
    /// Peak RSS (KiB) and status of `orchestrate run FILE` (the children wait4 reaped).
    static func peakRSS(_ runner: S3Runner, _ file: String) throws -> (status: Int, kib: Int, check: String) {
        let script = """
            import json, resource, subprocess, sys
            p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
            print(json.dumps({"status": p.returncode, "check": p.stderr[-2000:] + p.stdout[-2000:],
                              "rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
            """
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in runner.environment { environment[key] = value }
        // One malloc arena: what the threads free is reused by the others, so the peak follows
        // what is kept rather than how many threads a loaded machine kept busy at once.
        environment["MALLOC_ARENA_MAX"] = "1"
        let result = try ChildProcess.run(try PythonVenv.python(), ["-c", script, TestPaths.orchestrate.path] + runner.arguments(file, []),
                                          environment: environment)
        let answer = try JSONValue(parsing: result.stdout)
        return (Int(answer["status"]?.intValue ?? -1), Int(answer["rss"]?.intValue ?? 0), answer["check"]?.stringValue ?? result.stderr)
    }

    /// A chain of `count` multipart uploads (two 5 MiB parts each) in one run.
    static func chain(_ peer: S3Peer, source: String, count: Int) -> String {
        TransferTests.workflow(peer, (0..<count).map { n in
            """
              up\(n):
                uses: s3.upload
            \(n > 0 ? "    needs: [up\(n - 1)]\n" : "")    with: { endpoint: ENDPOINT, bucket: orc-bucket, key: "c\(count)/\(n).bin", source: "\(source)", multipart_threshold: 5242880, part_size: 5242880, concurrency: 2 }
            """
        }.joined(separator: "\n"))
    }

    /// 44 multipart uploads one after the other peak within 30 MiB of 4 (10 here): a hasher
    /// kept alive by its own work items kept its 1 MiB buffer and more (61 MiB for 40 more).
    @Test func finishedMultipartUploadsLeaveNothingBehind() throws {
        let peer = try S3Peer(.rclone)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("clip.bin")
        try Tools.randomFile(source, bytes: (5 << 20) + 4096)
        let few = try Self.peakRSS(runner, runner.workflow(Self.chain(peer, source: source, count: 4), name: "few.yaml"))
        let many = try Self.peakRSS(runner, runner.workflow(Self.chain(peer, source: source, count: 44), name: "many.yaml"))
        #expect(few.status == 0 && many.status == 0, "\(many.check)")
        #expect(many.kib - few.kib < 30 << 10, "4 uploads peaked at \(few.kib / 1024) MiB, 44 at \(many.kib / 1024) MiB")
        print("peak RSS: 4 uploads \(few.kib / 1024) MiB, 44 uploads \(many.kib / 1024) MiB")
    }
}
