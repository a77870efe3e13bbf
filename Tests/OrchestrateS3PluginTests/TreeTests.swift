import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Trees: s3.upload of a folder under a prefix, s3.download of a prefix into a folder, s3.delete
/// of a prefix, against moto_server and `rclone serve s3`, checked with the AWS CLI.
@Suite(.serialized) struct TreeTests {
    static let mib = 1 << 20

    /// A folder of small files in nested folders, one big file (2 parts of 5 MiB), an empty
    /// file, a symbolic link (skipped, not followed) and an empty folder (nothing to make).
    static func makeTree(_ runner: S3Runner) throws -> (root: String, files: [String: String]) {
        let root = runner.path("tree")
        var files: [String: String] = [:]
        for (relative, size) in [("a.txt", 1000), ("sub/b.bin", 70_000), ("sub/deeper/c d+é.txt", 12), ("empty.txt", 0), ("big.bin", 7 * mib)] {
            let path = root + "/" + relative
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Tools.randomFile(path, bytes: size)
            files[relative] = path
        }
        try FileManager.default.createDirectory(atPath: root + "/hollow", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/link-to-etc", withDestinationPath: "/etc/hostname")
        return (root, files)
    }

    func keys(_ peer: S3Peer, prefix: String) throws -> [String] {
        let listed = try peer.aws(["s3api", "list-objects-v2", "--bucket", "orc-bucket", "--prefix", prefix, "--output", "json"])
        #expect(listed.status == 0, "\(listed.stderr)")
        let json = try? JSONValue(parsing: listed.stdout)
        return (json?["Contents"]?.arrayValue ?? []).compactMap { $0["Key"]?.stringValue }.sorted()
    }

    func roundTrip(_ kind: S3Peer.Kind) throws {
        let peer = try S3Peer(kind)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let (root, files) = try Self.makeTree(runner)
        let back = runner.path("back")
        let file = runner.workflow(TransferTests.workflow(peer, """
              up:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, source: "\(root)", prefix: "in/tree/", multipart_threshold: 5242880,
                        part_size: 5242880, concurrency: 3 }
              get:
                needs: [up]
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, prefix: "in/tree/", destination: "\(back)", part_size: 4194304, page_size: 2 }
            """))
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))\nserver: \(peer.serverLog.suffix(3000))")
        #expect(try keys(peer, prefix: "in/") == files.keys.sorted().map { "in/tree/" + $0 })
        let up = try runner.stepOutputs("up")
        #expect(up?["files"]?.intValue == 5, "\(String(describing: up))")
        #expect(up?["bytes"]?.intValue == Int64(1000 + 70_000 + 12 + 7 * Self.mib))
        #expect(up?["uri"]?.stringValue == "s3://orc-bucket/in/tree/")
        #expect(up?["skipped"]?.intValue == 1)
        // A folder's outputs, and none of a file's.
        #expect(up?.objectValue?.keys.sorted() == ["bucket", "bytes", "files", "files_resumed", "prefix", "skipped", "uri"])
        let logs = S3Runner.events(result.stdout).ofType("step.log", step: "up").compactMap { $0["data"]?["message"]?.stringValue }
        #expect(logs.contains { $0.contains("link-to-etc: a symbolic link") }, "\(logs)")
        // The CLI reads each back byte for byte.
        for (relative, path) in files {
            let cli = runner.path("cli-\(relative.replacingOccurrences(of: "/", with: "_"))")
            let got = try peer.aws(["s3api", "get-object", "--bucket", "orc-bucket", "--key", "in/tree/" + relative, cli])
            #expect(got.status == 0, "\(relative): \(got.stderr)")
            #expect(Tools.sameBytes(cli, path), "\(relative)")
        }
        // The download (listed 2 keys a page) put every file in place, and nothing else.
        let get = try runner.stepOutputs("get")
        #expect(get?["files"]?.intValue == 5, "\(String(describing: get))")
        #expect(get?.objectValue?.keys.sorted() == ["bytes", "files", "files_resumed", "path", "skipped", "uri"])
        for (relative, path) in files { #expect(Tools.sameBytes(back + "/" + relative, path), "\(relative)") }
        let landed = (FileManager.default.enumerator(atPath: back)?.allObjects as? [String] ?? []).filter {
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: back + "/" + $0, isDirectory: &isDir) && !isDir.boolValue
        }
        #expect(landed.sorted() == files.keys.sorted(), "\(landed)")

        // Undo: the prefix deleted, 2 keys a request; the object beside it stays.
        #expect(try peer.aws(["s3api", "put-object", "--bucket", "orc-bucket", "--key", "in/treeX", "--body", files["a.txt"]!]).status == 0)
        let undo = runner.workflow(TransferTests.workflow(peer, """
              drop:
                uses: s3.delete
                with: { endpoint: ENDPOINT, bucket: orc-bucket, prefix: "in/tree/", page_size: 2 }
            """), name: "undo.yaml")
        let dropped = try runner.run(undo)
        #expect(dropped.status == 0, "\(TransferTests.check(dropped))")
        #expect(try runner.stepOutputs("drop")?["deleted"]?.intValue == 5)
        #expect(try keys(peer, prefix: "in/") == ["in/treeX"])
        #expect(try peer.openUploads("orc-bucket").isEmpty)
    }

    @Test func treeRoundTripWithMoto() throws { try roundTrip(.moto) }

    /// rclone checks every signature (the list, DeleteObjects) and keeps a real folder tree.
    @Test func treeRoundTripWithRclone() throws { try roundTrip(.rclone) }

    /// More than 1,000 keys: the listing is paged with continuation tokens (page_size 1000 is
    /// the default), for the download and the delete.
    @Test func moreThanAThousandKeysArePaged() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let root = runner.path("many")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for i in 0 ..< 1030 { _ = FileManager.default.createFile(atPath: root + "/f\(i)", contents: Data("\(i)".utf8)) }
        let file = runner.workflow(TransferTests.workflow(peer, """
              up:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, source: "\(root)", prefix: "many/", concurrency: 16 }
              get:
                needs: [up]
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, prefix: "many/", destination: "\(runner.path("back"))", concurrency: 16 }
              drop:
                needs: [get]
                uses: s3.delete
                with: { endpoint: ENDPOINT, bucket: orc-bucket, prefix: "many/" }
            """))
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        #expect(try runner.stepOutputs("get")?["files"]?.intValue == 1030)
        #expect((try? String(contentsOfFile: runner.path("back/f1029"), encoding: .utf8)) == "1029")
        #expect(try runner.stepOutputs("drop")?["deleted"]?.intValue == 1030)
        #expect(peer.serverLog.components(separatedBy: "continuation-token=").count - 1 >= 2, "the listings were not paged")
        #expect(try keys(peer, prefix: "many/").isEmpty)
    }

    /// Wrong combinations are clear errors before any request.
    @Test(arguments: [
        ("s3.upload", "source: SRCDIR, key: k, prefix: p/", "not both"),
        ("s3.upload", "source: SRCDIR", "give key (one object) or prefix"),
        ("s3.upload", "source: SRCDIR, prefix: p", "must end with \"/\""),
        ("s3.upload", "source: SRCDIR, key: k", "is not a regular file"),
        ("s3.upload", "source: SRCFILE, prefix: p/", "is not a folder"),
        ("s3.download", "prefix: p, destination: DEST", "must end with \"/\""),
        ("s3.download", "destination: DEST", "give key (one object) or prefix"),
        ("s3.delete", "prefix: \"\"", "whole_bucket: true"),
        ("s3.delete", "key: k, prefix: p/", "not both"),
    ]) func badTargetsAreRefused(step: String, with: String, says: String) throws {
        let runner = S3Runner()
        try FileManager.default.createDirectory(atPath: runner.path("src"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: runner.path("f"), contents: Data("x".utf8))
        let inputs = with.replacingOccurrences(of: "SRCDIR", with: "\"\(runner.path("src"))\"")
            .replacingOccurrences(of: "SRCFILE", with: "\"\(runner.path("f"))\"").replacingOccurrences(of: "DEST", with: "\"\(runner.path("d"))\"")
        let file = runner.workflow("""
            version: 1
            name: s3-bad
            steps:
              s:
                uses: \(step)
                with: { endpoint: "http://127.0.0.1:9", bucket: orc-bucket, \(inputs) }
            """)
        let result = try runner.run(file)
        let failed = try #require(S3Runner.events(result.stdout).ofType("step.failed", step: "s").last, "\(TransferTests.check(result))")
        #expect(failed["data"]?["kind"]?.stringValue == "invalid-input", "\(failed)")
        let message = failed["data"]?["error"]?.stringValue ?? ""
        #expect(message.contains(says), "\(failed)")
    }
}
