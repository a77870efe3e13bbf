import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A tree's small files are committed in batches (BatchCommit): renamed into place only once
/// fsynced, journaled only once their folder is fsynced; a commit that fails fails the step
/// and leaves no partial file behind.
@Suite struct BatchCommitTests {
    static let count = 60

    func upload(_ peer: S3Peer, _ runner: S3Runner) throws -> String {
        let root = runner.path("tree")
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        for i in 0 ..< Self.count { try Tools.randomFile(root + (i % 3 == 0 ? "/sub/f\(i)" : "/f\(i)"), bytes: 1000 + i) }
        let sync = try peer.aws(["s3", "cp", "--recursive", root, "s3://orc-bucket/t/"])
        #expect(sync.status == 0, "\(sync.stderr)")
        return root
    }

    static func partials(_ folder: String) -> [String] {
        (FileManager.default.enumerator(atPath: folder)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".part") }
    }

    /// Every file lands whole, none is left as a partial.
    @Test func aTreeOfSmallFilesLandsWhole() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let root = try upload(peer, runner)
        let back = runner.path("back")
        let file = runner.workflow(TransferTests.workflow(peer, """
              get:
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, prefix: "t/", destination: "\(back)" }
            """))
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        for i in 0 ..< Self.count {
            let relative = i % 3 == 0 ? "sub/f\(i)" : "f\(i)"
            #expect(Tools.sameBytes(back + "/" + relative, root + "/" + relative), "\(relative)")
        }
        #expect(Self.partials(back).isEmpty, "\(Self.partials(back))")
        #expect(try runner.stepOutputs("get")?["files"]?.intValue == Int64(Self.count))
    }

    /// A file whose rename cannot happen (a folder holds its name): the step fails, the error
    /// names it, and no partial file is left.
    @Test func aCommitThatFailsFailsTheStepAndLeavesNoPartial() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        _ = try upload(peer, runner)
        let back = runner.path("back")
        try FileManager.default.createDirectory(atPath: back + "/f50/in-the-way", withIntermediateDirectories: true)
        let file = runner.workflow("""
            version: 1
            name: s3-commit-fails
            steps:
              get:
                uses: s3.download
                with: { endpoint: "\(peer.endpoint)", bucket: orc-bucket, prefix: "t/", destination: "\(back)" }
            """)
        let result = try runner.run(file)
        #expect(result.status != 0, "\(TransferTests.check(result))")
        let failed = try #require(S3Runner.events(result.stdout).ofType("step.failed", step: "get").last, "\(TransferTests.check(result))")
        #expect(failed["data"]?["error"]?.stringValue?.contains("f50") == true, "\(failed)")
        #expect(Self.partials(back).isEmpty, "\(Self.partials(back))")
    }
}
