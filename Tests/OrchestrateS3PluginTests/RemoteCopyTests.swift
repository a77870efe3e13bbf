import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Named remotes and `orchestrate copy` against real S3 servers: moto_server and `rclone serve
/// s3` (which checks every signature, so a run that succeeds there used the remote's secret).
/// The remotes file lives in a private XDG_CONFIG_HOME per test; no AWS_* keys are in the
/// environment, so the credentials can only come from the remote.
@Suite(.serialized) struct RemoteCopyTests {
    static let mib = 1 << 20
    static let secretVariable = "MEDIA_TEST_SECRET"

    /// A runner whose remotes file holds `remotes` (YAML under `remotes:`), mode `mode`.
    static func runner(remotes: String, mode: Int = 0o600) throws -> S3Runner {
        let runner = S3Runner()
        let config = runner.path("config")
        try FileManager.default.createDirectory(atPath: config + "/orchestrate", withIntermediateDirectories: true)
        let file = config + "/orchestrate/remotes.yaml"
        try ("remotes:\n" + remotes).write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file)
        runner.environment = [
            "XDG_CONFIG_HOME": config, "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            secretVariable: S3Peer.secretKey,
        ]
        return runner
    }

    /// An s3 remote named `name` on `peer`, its secret key from the environment.
    static func remote(_ name: String, _ peer: S3Peer, bucket: String?, extra: String = "") -> String {
        """
          \(name):
            type: s3
            endpoint: \(peer.endpoint)
            region: us-east-1
        \(bucket.map { "    bucket: \($0)\n" } ?? "")    access_key_id: \(S3Peer.accessKey)
            secret_access_key: { env: \(secretVariable) }
        \(extra)
        """
    }

    /// `renders/a.bin` and `renders/day1/b.bin` in the runner's folder; returns `renders`'s path.
    static func smallTree(_ runner: S3Runner) throws -> String {
        let tree = runner.path("renders")
        try FileManager.default.createDirectory(atPath: tree + "/day1", withIntermediateDirectories: true)
        try Tools.randomFile(tree + "/a.bin", bytes: 1000)
        try Tools.randomFile(tree + "/day1/b.bin", bytes: 2000)
        return tree
    }

    /// Every key of `bucket`, as the AWS CLI lists them.
    static func keys(_ peer: S3Peer, _ bucket: String) throws -> [String] {
        let listed = try peer.aws(["s3api", "list-objects-v2", "--bucket", bucket, "--query", "Contents[].Key", "--output", "json"]).stdout
        return try JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [String] ?? []
    }

    static func copy(_ runner: S3Runner, _ arguments: [String]) throws -> ProcessResult {
        try runner.orchestrate(["copy"] + arguments + ["--json"])
    }

    @Test func aFileGoesUpAndComesBackThroughARemoteByteIdentical() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("media")
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "media"))
        let source = runner.path("movie.bin")
        try Tools.randomFile(source, bytes: 3 * Self.mib + 17)

        let up = try Self.copy(runner, [source, "media:masters/"])
        #expect(up.status == 0, "\(TransferTests.check(up))")
        let fetched = runner.path("fetched-by-aws.bin")
        #expect(try peer.aws(["s3api", "get-object", "--bucket", "media", "--key", "masters/movie.bin", fetched]).status == 0)
        #expect(Tools.sameBytes(fetched, source), "uploaded to masters/movie.bin, byte for byte")

        try FileManager.default.createDirectory(atPath: runner.path("back"), withIntermediateDirectories: true)
        let down = try Self.copy(runner, ["media:masters/movie.bin", runner.path("back")])
        #expect(down.status == 0, "\(TransferTests.check(down))")
        #expect(Tools.sameBytes(runner.path("back/movie.bin"), source))

        // Both copies are runs of a workflow named copy, listed like any other.
        let listed = S3Runner.events(try runner.orchestrate(["list", "--json"]).stdout)
        #expect(listed.count == 2)
        #expect(listed.allSatisfy { $0["workflow"]?.stringValue == "copy" && $0["status"]?.stringValue == "succeeded" }, "\(listed)")
    }

    /// A name that starts with a combining mark: "/" and the mark are one Swift Character, so a
    /// split by characters took the whole path for the file's name (the key became
    /// "masters/" + the local path, and the download landed in a folder named after the prefix).
    @Test func aNameThatStartsWithACombiningMarkKeepsItsOwnNameBothWays() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("media")
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "media"))
        let name = "\u{301}take.bin"
        try FileManager.default.createDirectory(atPath: runner.path("sub"), withIntermediateDirectories: true)
        let source = runner.path("sub/" + name)
        try Tools.randomFile(source, bytes: 70_000)

        let up = try Self.copy(runner, [source, "media:masters/"])
        #expect(up.status == 0, "\(TransferTests.check(up))")
        let listed = try Self.keys(peer, "media")
        #expect(listed.map { Array($0.utf8) } == [Array(("masters/" + name).utf8)], "\(listed)")

        try FileManager.default.createDirectory(atPath: runner.path("back"), withIntermediateDirectories: true)
        let down = try Self.copy(runner, ["media:masters/" + name, runner.path("back")])
        #expect(down.status == 0, "\(TransferTests.check(down))")
        let landed = try FileManager.default.contentsOfDirectory(atPath: runner.path("back"))
        #expect(landed.map { Array($0.utf8) } == [Array(name.utf8)], "\(landed)")
        #expect(Tools.sameBytes(runner.path("back/" + name), source))
    }

    @Test func aFolderGoesUpUnderAPrefixAndComesBackWithRecursive() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("media")
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "media"))
        let tree = runner.path("renders")
        try FileManager.default.createDirectory(atPath: tree + "/day1/cam", withIntermediateDirectories: true)
        try Tools.randomFile(tree + "/a.bin", bytes: 70_000)
        try Tools.randomFile(tree + "/day1/b.bin", bytes: 6 * Self.mib)
        try Tools.randomFile(tree + "/day1/cam/c.bin", bytes: 1)

        let up = try Self.copy(runner, ["--recursive", tree, "media:projects/"])
        #expect(up.status == 0, "\(TransferTests.check(up))")
        let listed = try peer.aws(["s3api", "list-objects-v2", "--bucket", "media", "--output", "json"]).stdout
        for key in ["projects/renders/a.bin", "projects/renders/day1/b.bin", "projects/renders/day1/cam/c.bin"] {
            #expect(listed.contains(key), "\(key) in \(listed)")
        }
        let down = try Self.copy(runner, ["-r", "media:projects/renders", runner.path("back")])
        #expect(down.status == 0, "\(TransferTests.check(down))")
        for file in ["a.bin", "day1/b.bin", "day1/cam/c.bin"] {
            #expect(Tools.sameBytes(runner.path("back/" + file), tree + "/" + file), "\(file)")
        }
    }

    /// A SRC of "DIR/." names no folder of its own: what it holds goes into DST, as with cp, and
    /// no key gets a "." component.
    @Test func aDotSourceFillsTheDestinationItself() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("media")
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "media"))
        let tree = try Self.smallTree(runner)

        let up = try Self.copy(runner, ["-r", tree + "/.", "media:in/"])
        #expect(up.status == 0, "\(TransferTests.check(up))")
        let listed = try Self.keys(peer, "media")
        #expect(listed.sorted() == ["in/a.bin", "in/day1/b.bin"], "\(listed)")

        let root = try Self.copy(runner, ["-r", tree + "/.", "media:"])
        #expect(root.status == 0, "\(TransferTests.check(root))")
        let bucket = try Self.keys(peer, "media")
        #expect(bucket.sorted() == ["a.bin", "day1/b.bin", "in/a.bin", "in/day1/b.bin"], "\(bucket)")
    }

    /// A file name with DEL or a C1 control: the workflow copy builds (its description quotes the
    /// command) still reads back, and the key is the name.
    @Test func aNameWithControlCharactersYAMLRefusesStillCopies() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("media")
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "media"))
        let name = "a\u{7F}b\u{9B}c.bin"
        try Tools.randomFile(runner.path(name), bytes: 1000)
        let up = try Self.copy(runner, [runner.path(name), "media:in/"])
        #expect(up.status == 0, "\(TransferTests.check(up))")
        let listed = try Self.keys(peer, "media")
        #expect(listed.map { Array($0.utf8) } == [Array(("in/" + name).utf8)], "\(listed)")
    }

    /// `-r REMOTE:PREFIX DST` names its folder as a local one does: into an existing DST (or one
    /// ending in "/") as PREFIX's last name; `PREFIX/.` adds none.
    @Test func aRecursiveDownloadNamesItsFolderAsAnUploadDoes() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("media")
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "media"))
        let tree = try Self.smallTree(runner)
        #expect(try Self.copy(runner, ["-r", tree, "media:projects/"]).status == 0)

        try FileManager.default.createDirectory(atPath: runner.path("out"), withIntermediateDirectories: true)
        let named = try Self.copy(runner, ["-r", "media:projects/renders", runner.path("out")])
        #expect(named.status == 0, "\(TransferTests.check(named))")
        #expect(Tools.sameBytes(runner.path("out/renders/day1/b.bin"), tree + "/day1/b.bin"))
        let dot = try Self.copy(runner, ["-r", "media:projects/renders/.", runner.path("flat/")])
        #expect(dot.status == 0, "\(TransferTests.check(dot))")
        #expect(Tools.sameBytes(runner.path("flat/a.bin"), tree + "/a.bin"))
        #expect(Tools.sameBytes(runner.path("flat/day1/b.bin"), tree + "/day1/b.bin"))
    }

    @Test func anS3URLAndARemoteWithoutABucketWork() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("raw")
        let runner = try Self.runner(remotes: Self.remote("store", peer, bucket: nil))
        let source = runner.path("a.bin")
        try Tools.randomFile(source, bytes: 100_000)
        let up = try Self.copy(runner, [source, "store:raw/in/a.bin"])
        #expect(up.status == 0, "\(TransferTests.check(up))")
        let fetched = runner.path("f.bin")
        #expect(try peer.aws(["s3api", "get-object", "--bucket", "raw", "--key", "in/a.bin", fetched]).status == 0)
        #expect(Tools.sameBytes(fetched, source))
    }

    /// The same command again continues an interrupted folder download, though the folder it
    /// made now exists (planned afresh, SRC would go into it as a folder of its own).
    @Test func theSameCommandContinuesAFolderDownloadIntoTheFolderItMade() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("media")
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "media", extra: "    max_rate: 2097152"))
        let tree = runner.path("t")
        try FileManager.default.createDirectory(atPath: tree, withIntermediateDirectories: true)
        // 40 files of 256 KiB at 2 MiB/s, 16 at a time: the first ones land after about 2 s, all after 5.
        for i in 0 ..< 40 { try Tools.randomFile(tree + "/f\(i).bin", bytes: Self.mib / 4) }
        #expect(try Self.copy(runner, ["-r", tree, "media:"]).status == 0)
        let destination = runner.path("got")
        let arguments = ["copy", "-r", "media:t", destination, "--state", runner.state, "--json"]
        let child = try SpawnedChild([TestPaths.orchestrate.path] + arguments,
                                     stdout: runner.path("events.jsonl"), stderr: runner.path("stderr.log"),
                                     environment: ProcessInfo.processInfo.environment.merging(runner.environment) { _, b in b })
        let landed = { (try? FileManager.default.contentsOfDirectory(atPath: destination))?.filter { $0.hasPrefix("f") }.count ?? 0 }
        let reached = Tools.waitFor(60) { landed() >= 2 }
        kill(child.pid, SIGKILL)
        _ = child.wait(timeout: 10)
        #expect(reached && landed() < 40, "\(landed()) files before the kill")

        let again = try runner.orchestrate(Array(arguments.dropLast(3)))
        #expect(again.status == 0, "\(TransferTests.check(again))")
        #expect(again.stderr.contains("the same copy was interrupted"), "\(again.stderr)")
        #expect(try runner.runIDs().count == 2, "the upload and the one download run")
        for i in 0 ..< 40 { #expect(Tools.sameBytes(destination + "/f\(i).bin", tree + "/f\(i).bin"), "f\(i).bin") }
        #expect(!FileManager.default.fileExists(atPath: destination + "/t"), "not nested in a folder of its own")
    }

    @Test func aCopyKilledWithKillNineFinishesWithResume() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("media")
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "media", extra: "    max_rate: 6291456"))
        let source = runner.path("big.bin")
        try Tools.randomFile(source, bytes: 40 * Self.mib + 5)  // 5 parts of 8 MiB at 6 MiB/s
        let child = try SpawnedChild([TestPaths.orchestrate.path, "copy", source, "media:big.bin", "--state", runner.state, "--json"],
                                     stdout: runner.path("events.jsonl"), stderr: runner.path("stderr.log"),
                                     environment: ProcessInfo.processInfo.environment.merging(runner.environment) { _, b in b })
        let reached = Tools.waitFor(60) { peer.partsReceived().count >= 2 }
        kill(child.pid, SIGKILL)
        _ = child.wait(timeout: 10)
        #expect(reached, "\(peer.serverLog.suffix(2000))")
        #expect(peer.partsReceived().count < 5, "the copy finished before the kill")
        let run = try #require(try runner.runIDs().last)

        let resumed = try runner.orchestrate(["resume", run, "--json"])
        #expect(resumed.status == 0, "\(TransferTests.check(resumed))")
        #expect(peer.partsReceived().values.allSatisfy { $0 == 1 }, "no part sent twice: \(peer.partsReceived())")
        let fetched = runner.path("f.bin")
        #expect(try peer.aws(["s3api", "get-object", "--bucket", "media", "--key", "big.bin", fetched]).status == 0)
        #expect(Tools.sameBytes(fetched, source))
    }

    @Test func aRemotesSecretNeverReachesTheStoreTheEventsOrTheOutput() throws {
        let peer = try S3Peer(.rclone)  // checks signatures: success proves the secret was used
        try peer.makeBucket("vault")
        let keep = TemporaryDirectory("s3secret")
        let secretFile = keep.file("s3-secret").path
        try (S3Peer.secretKey + "\n").write(toFile: secretFile, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secretFile)
        let runner = try Self.runner(remotes: Self.remote("vault", peer, bucket: "vault") + """
              vault-file:
                type: s3
                endpoint: \(peer.endpoint)
                bucket: vault
                access_key_id: \(S3Peer.accessKey)
                secret_access_key: { file: \(secretFile) }
              vault-wrong:
                type: s3
                endpoint: \(peer.endpoint)
                bucket: vault
                access_key_id: { env: VAULT_KEY_ID }
                secret_access_key: { env: VAULT_WRONG_SECRET }
            """)
        runner.environment["VAULT_KEY_ID"] = S3Peer.accessKey
        runner.environment["VAULT_WRONG_SECRET"] = "not-the-secret"
        let source = runner.path("doc.bin")
        try Tools.randomFile(source, bytes: 200_000)
        let env = try Self.copy(runner, [source, "vault:from-env.bin"])
        #expect(env.status == 0, "\(TransferTests.check(env))")
        let file = try Self.copy(runner, [source, "vault-file:from-file.bin"])
        #expect(file.status == 0, "\(TransferTests.check(file))")
        // A workflow naming the remote: its text holds the remote's name, never the secret.
        let flow = runner.workflow("""
            version: 1
            name: through-a-remote
            steps:
              up:
                uses: s3.upload
                with: { remote: vault-file, key: from-workflow.bin, source: "\(source)" }
            """)
        let ran = try runner.run(flow)
        #expect(ran.status == 0, "\(TransferTests.check(ran))")

        // A value read by reference is a secret whatever its field: the server's refusal names the
        // access key id, which is masked in the error, the events and the store.
        let refused = try Self.copy(runner, [source, "vault-wrong:refused.bin"])
        #expect(refused.status == 1, "\(refused.stdout)\n\(refused.stderr)")
        #expect(refused.stdout.contains("***") && !refused.stdout.contains(S3Peer.accessKey), "\(refused.stdout)")
        let wrongRun = try #require(try runner.runIDs().last)
        let wrongEvents = try runner.orchestrate(["events", wrongRun, "--json"]).stdout
        #expect(wrongEvents.contains("step.failed") && !wrongEvents.contains(S3Peer.accessKey), "\(wrongEvents)")

        let secret = Data(S3Peer.secretKey.utf8)
        for result in [env, file, ran] {
            #expect(!result.stdout.contains(S3Peer.secretKey) && !result.stderr.contains(S3Peer.secretKey), "the secret was printed")
        }
        let events = try runner.orchestrate(["events", "--json"]).stdout
        #expect(!events.isEmpty && !events.contains(S3Peer.secretKey), "the secret is in the events")
        for run in try runner.runIDs() {
            #expect(!(try runner.orchestrate(["status", run, "--json"]).stdout.contains(S3Peer.secretKey)))
        }
        let stored = FileManager.default.enumerator(atPath: runner.state)?.compactMap { $0 as? String } ?? []
        #expect(stored.contains("state.sqlite"))
        for name in stored {
            #expect(FileManager.default.contents(atPath: runner.state + "/" + name)?.range(of: secret) == nil, "the secret is in \(name)")
        }
        let shown = try runner.orchestrate(["remote", "show", "vault-file"])
        #expect(shown.status == 0 && shown.stdout.contains("(secret, from the file \(secretFile))"), "\(shown.stdout)")
        #expect(!shown.stdout.contains(S3Peer.secretKey))
    }

    @Test func aWorkflowUsesFileRemotesAndItsOwnAndItsOwnWinByName() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("file-bucket")
        try peer.makeBucket("workflow-bucket")
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "file-bucket") + Self.remote("archive", peer, bucket: "file-bucket"))
        let source = runner.path("a.bin")
        try Tools.randomFile(source, bytes: 50_000)
        let flow = runner.workflow("""
            version: 1
            name: two-remotes
            remotes:
              media:
                type: s3
                endpoint: \(peer.endpoint)
                bucket: workflow-bucket
                access_key_id: \(S3Peer.accessKey)
                secret_access_key: { env: \(Self.secretVariable) }
            steps:
              mine:
                uses: s3.upload
                with: { remote: media, key: mine.bin, source: "\(source)" }
              theirs:
                uses: s3.upload
                with: { remote: archive, key: theirs.bin, source: "\(source)" }
            """)
        let ran = try runner.run(flow)
        #expect(ran.status == 0, "\(TransferTests.check(ran))")
        let listed = try peer.aws(["s3api", "list-objects-v2", "--bucket", "workflow-bucket", "--output", "json"]).stdout
        #expect(listed.contains("mine.bin") && !listed.contains("theirs.bin"), "the workflow's media wins: \(listed)")
        let other = try peer.aws(["s3api", "list-objects-v2", "--bucket", "file-bucket", "--output", "json"]).stdout
        #expect(other.contains("theirs.bin") && !other.contains("mine.bin"), "archive comes from the file: \(other)")
    }

    @Test func remoteListShowAndTest() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("media")
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "media") + Self.remote("gone", peer, bucket: "no-such-bucket"))
        let listed = try runner.orchestrate(["remote", "list"])
        #expect(listed.status == 0)
        #expect(listed.stdout.contains("media") && listed.stdout.contains("s3") && listed.stdout.contains(peer.endpoint), "\(listed.stdout)")
        let shown = try runner.orchestrate(["remote", "show", "media"])
        #expect(shown.stdout.contains("secret_access_key") && shown.stdout.contains("(secret, from the environment variable \(Self.secretVariable))"))
        #expect(!shown.stdout.contains(S3Peer.secretKey))
        let tested = try runner.orchestrate(["remote", "test", "media"])
        #expect(tested.status == 0, "\(tested.stdout)\n\(tested.stderr)")
        #expect(tested.stdout.contains("media: ok"), "\(tested.stdout)")
        let broken = try runner.orchestrate(["remote", "test", "gone"])
        #expect(broken.status == 1, "\(broken.stdout)\n\(broken.stderr)")
        #expect(broken.stdout.contains("gone: FAILED"), "\(broken.stdout)")
        let unknown = try runner.orchestrate(["remote", "show", "medai"])
        #expect(unknown.status == 2 && unknown.stderr.contains("did you mean 'media'?"), "\(unknown.stderr)")
    }

    @Test func aRemotesFileOthersCanReadIsRefused() throws {
        let peer = try S3Peer(.moto)
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "media"), mode: 0o644)
        let source = runner.path("a.bin")
        try Tools.randomFile(source, bytes: 1000)
        let copied = try Self.copy(runner, [source, "media:a.bin"])
        #expect(copied.status == 2)
        #expect(copied.stderr.contains("orchestrate refuses the remotes file") && copied.stderr.contains("chmod 600"), "\(copied.stderr)")
        let flow = runner.workflow("""
            version: 1
            name: up
            steps:
              up:
                uses: s3.upload
                with: { remote: media, key: a, source: "\(source)" }
            """)
        let ran = try runner.run(flow)
        #expect(ran.status == 2)
        #expect(ran.stderr.contains("wf.yaml:6:21: error: remote 'media' is not defined in this workflow, and the remotes file cannot be used"),
                "\(ran.stderr)")
        #expect(try runner.orchestrate(["remote", "list"]).status == 2)
        #expect(try runner.runIDs().isEmpty, "nothing ran")
    }

    @Test func badCopyArgumentsAreUsageErrors() throws {
        let peer = try S3Peer(.moto)
        let runner = try Self.runner(remotes: Self.remote("media", peer, bucket: "media"))
        let folder = runner.path("folder")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let cases: [([String], String)] = [
            ([folder, "media:x/"], "is a folder: add --recursive"),
            ([runner.path("missing"), "media:x"], "does not exist"),
            ([runner.path("x"), "meda:x"], "unknown remote 'meda'"),
            (["media:a", "s3://other/b"], "has a server on both sides"),
            ([runner.path("x"), "https://example.invalid/x"], "downloads only"),
            (["sftp://me:pw@host/x", runner.path("x")], "holds a password"),
            (["https://me:token@example.invalid/x", runner.path("x")], "holds credentials"),
            (["https://token@example.invalid/x", runner.path("x")], "holds credentials"),
            (["s3://AKIA:secret@media/x", runner.path("x")], "never in the URL"),
            (["gopher://host/x", runner.path("x")], "not gopher://"),
        ]
        for (arguments, message) in cases {
            let result = try Self.copy(runner, arguments)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        let unknownFlow = runner.workflow("""
            version: 1
            name: up
            steps:
              up:
                uses: s3.upload
                with: { remote: meda, key: a, source: /a }
            """)
        let ran = try runner.run(unknownFlow)
        #expect(ran.status == 2)
        #expect(ran.stderr.contains("wf.yaml:6:21: error: unknown remote 'meda'") && ran.stderr.contains("did you mean 'media'?"), "\(ran.stderr)")
    }
}
