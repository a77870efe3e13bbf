import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// s3.download of a prefix takes local paths from keys someone else chose. Keys planted with
/// the AWS CLI on moto (which stores any key as given) that would leave the destination, or
/// that a filesystem cannot hold beside the others, are skipped with the reason; nothing is
/// ever written outside the destination.
@Suite(.serialized) struct KeyAttackTests {
    struct Case: CustomStringConvertible, Sendable {
        var key: String
        /// What the warning says.
        var says: String
        /// The files expected under the destination, relative.
        var landed: [String] = ["ok.txt"]
        var skipped: Int64 = 1
        var description: String { key.debugDescription }
    }

    static let cases: [Case] = [
        Case(key: "p/../x", says: "has a \"..\" path component"),
        // A "/" a combining mark follows is one Swift character but a "/" to the filesystem: the
        // ".." before it must still be seen (it would climb into the destination's parent).
        Case(key: "p/../\u{301}/evil", says: "has a \"..\" path component"),
        Case(key: "p/a/../../y", says: "has a \"..\" path component"),
        Case(key: "p//etc/z", says: "starts with \"/\" (an absolute path)"),
        Case(key: "p/a//b", says: "has an empty path component"),
        Case(key: "p/./c", says: "has a \".\" path component"),
        Case(key: "p/nul\u{0}x", says: "holds a NUL byte"),
        Case(key: "p/.ok.txt.part", says: "is the name of the partial file of ok.txt"),
        // A folder marker is nothing to write, and not an error.
        Case(key: "p/dir/", says: "", skipped: 0),
        // "ok.txt" cannot be a file and the folder of ok.txt/inner at once: the file is skipped.
        Case(key: "p/ok.txt/inner", says: "is also the folder of other keys", landed: ["ok.txt/inner"]),
    ]

    @Test(arguments: cases) func plantedKeyIsSkipped(_ planted: Case) throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let body = runner.path("body.txt")
        _ = FileManager.default.createFile(atPath: body, contents: Data("planted".utf8))
        let ok = runner.path("ok.txt")
        _ = FileManager.default.createFile(atPath: ok, contents: Data("fine".utf8))
        #expect(try peer.aws(["s3api", "put-object", "--bucket", "orc-bucket", "--key", "p/ok.txt", "--body", ok]).status == 0)
        // JSON input carries any key, NUL included.
        let json: JSONValue = ["Bucket": "orc-bucket", "Key": .string(planted.key), "Body": .string(body)]
        let request = runner.dir.write("put.json", json.jsonText)
        let put = try peer.aws(["s3api", "put-object", "--cli-input-json", "file://\(request.path)"])
        #expect(put.status == 0, "\(put.stderr)")

        let box = runner.path("box")
        let destination = box + "/dest"
        let file = runner.workflow(TransferTests.workflow(peer, """
              get:
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, prefix: "p/", destination: "\(destination)" }
            """))
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        let outputs = try runner.stepOutputs("get")
        #expect(outputs?["skipped"]?.intValue == planted.skipped, "\(String(describing: outputs))")
        #expect(outputs?["files"]?.intValue == Int64(planted.landed.count))
        if !planted.says.isEmpty {
            let logs = S3Runner.events(result.stdout).ofType("step.log", step: "get").compactMap { $0["data"]?["message"]?.stringValue }
            #expect(logs.contains { $0.contains("skipping the key") && $0.contains(planted.says) }, "\(logs)")
        }
        // Everything under the box (the destination's parent): the expected files, nothing else.
        var written: [String] = []
        let walker = FileManager.default.enumerator(atPath: box)
        while let name = walker?.nextObject() as? String {
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: box + "/" + name, isDirectory: &isDir), !isDir.boolValue { written.append(name) }
        }
        #expect(written.sorted() == planted.landed.map { "dest/" + $0 }.sorted(), "\(written)")
        #expect(!FileManager.default.fileExists(atPath: runner.path("x")) && !FileManager.default.fileExists(atPath: runner.path("y")))
    }

    /// Puts `keys` (under the prefix "p/"), plants a symbolic link at `link` in the destination
    /// towards a folder outside it, and downloads the prefix: the step must fail on the link
    /// (`not_a_folder`) with nothing written through it. Returns the runner (its folder lives
    /// as long as it does) and the destination.
    func downloadThroughPlantedLink(keys: [String], link: String) throws -> (runner: S3Runner, destination: String) {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let body = runner.path("body.txt")
        _ = FileManager.default.createFile(atPath: body, contents: Data("planted".utf8))
        for key in keys {
            #expect(try peer.aws(["s3api", "put-object", "--bucket", "orc-bucket", "--key", "p/" + key, "--body", body]).status == 0)
        }
        let outside = runner.path("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        let destination = runner.path("dest")
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        #expect(symlink(outside, destination + "/" + link) == 0)
        let file = runner.workflow(TransferTests.workflow(peer, """
              get:
                uses: s3.download
                retry: { max_attempts: 1 }
                with: { endpoint: ENDPOINT, bucket: orc-bucket, prefix: "p/", destination: "\(destination)", concurrency: 1 }
            """))
        let result = try runner.run(file)
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty, "written through the planted link")
        let failed = try #require(S3Runner.events(result.stdout).ofType("step.failed", step: "get").last, "\(TransferTests.check(result))")
        #expect(failed["data"]?["code"]?.stringValue == "not_a_folder", "\(failed)")
        return (runner, destination)
    }

    /// A symbolic link planted inside the destination (towards a folder outside it) is not
    /// followed: the download fails on it, and nothing is written through it.
    @Test func symlinkInTheDestinationIsNotFollowed() throws {
        _ = try downloadThroughPlantedLink(keys: ["sub/f.txt"], link: "sub")
    }

    /// Two folder names that differ only in Unicode normalization ("café" precomposed and "cafe"
    /// with a combining accent) are two folders to the filesystem, but equal Swift Strings: a
    /// folder checked under one name must not vouch for the other, where a symbolic link towards
    /// a folder outside was planted.
    @Test func aFolderNameInTheOtherNormalizationIsCheckedToo() throws {
        let decomposed = "cafe\u{301}", precomposed = "caf\u{E9}"
        #expect(Array(decomposed.utf8) != Array(precomposed.utf8) && decomposed == precomposed)
        // Keys are fetched in byte order: the decomposed folder ("e", 0x65) first.
        let (runner, destination) = try downloadThroughPlantedLink(keys: ["\(decomposed)/a.txt", "\(precomposed)/b.txt"], link: precomposed)
        // The decomposed name was a folder of its own, made as one (the run stopped at the link).
        var info = stat()
        #expect(lstat(destination + "/" + decomposed, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR)
        withExtendedLifetime(runner) {}
    }
}

/// A key with "." and ".." segments is one object's name in S3: s3.upload and s3.download of it
/// by key reach that object (the path is sent as signed, not squashed by libcurl), on moto and
/// on rclone (which checks the signature).
@Suite(.serialized) struct DotSegmentKeyTests {
    @Test(arguments: [S3Peer.Kind.moto]) func aKeyWithDotSegmentsIsThatObject(kind: S3Peer.Kind) throws {
        let peer = try S3Peer(kind)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 5000)
        let file = runner.workflow(TransferTests.workflow(peer, """
              up:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: "d/a/../b/./c", source: "\(source)" }
              get:
                needs: [up]
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: "d/a/../b/./c", destination: "\(runner.path("back.bin"))" }
            """))
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        #expect(Tools.sameBytes(runner.path("back.bin"), source))
        let listed = try peer.aws(["s3api", "list-objects-v2", "--bucket", "orc-bucket", "--output", "json"])
        let keys = ((try? JSONValue(parsing: listed.stdout))?["Contents"]?.arrayValue ?? []).compactMap { $0["Key"]?.stringValue }
        #expect(keys == ["d/a/../b/./c"], "\(keys)")
    }

    /// content_type goes into a header line: a line break in it would add a header of its own
    /// (here a public ACL). The step is refused before anything is sent.
    @Test func aContentTypeThatWouldAddAHeaderIsRefused() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 100)
        let file = runner.workflow(TransferTests.workflow(peer, """
              up:
                uses: s3.upload
                retry: { max_attempts: 1 }
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: a.bin, source: "\(source)", content_type: "text/plain\\r\\nx-amz-acl: public-read" }
            """))
        let result = try runner.run(file)
        #expect(result.status == 1, "\(TransferTests.check(result))")
        let failed = S3Runner.events(result.stdout).ofType("step.failed", step: "up").last?["data"]
        #expect(failed?["code"]?.stringValue == "bad_header", "\(String(describing: failed))")
        let listed = try peer.aws(["s3api", "list-objects-v2", "--bucket", "orc-bucket", "--output", "json"])
        #expect(!listed.stdout.contains("a.bin"), "nothing was stored: \(listed.stdout)")
    }
}
