import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// ftp.upload and ftp.download against pyftpdlib with TLS (tools/ftps_server.py): trees and
/// files byte-identical, `kill -9` then `resume` going on with APPE/REST (the server's log shows
/// no file sent twice), an untrusted certificate and a server without TLS refused clearly,
/// `tls: none` only by name, a hostile listing name and a PASV reply aimed elsewhere.
@Suite(.serialized) struct FTPSTests {
    static let passwordVariable = "FTP_TEST_PASSWORD"

    /// One step of `uses` against `server`, the password a secret; `with` adds inputs (YAML flow
    /// entries); `caFile` false: the server's certificate is not trusted.
    static func workflow(_ runner: Runner, _ server: PyFTPServer, uses: String, with: String, caFile: Bool = true,
                         name: String = "wf.yaml") -> String
    {
        runner.workflow("""
            version: 1
            name: ftp
            secrets: { password: { env: \(passwordVariable) } }
            steps:
              move:
                uses: \(uses)
                retry: { max_attempts: 2, initial_interval: 10ms }
                with: { host: 127.0.0.1, port: \(server.port), user: \(server.user), password: "${{ secrets.password }}", \
            \(caFile ? "ca_file: \"\(server.certificate.cert)\", " : "")\(with) }
            outputs:
              files: "${{ steps.move.outputs.files }}"
              resumed_bytes: "${{ steps.move.outputs.resumed_bytes }}"
            """, name: name)
    }

    static func runner(_ server: PyFTPServer) -> Runner { Runner(environment: [passwordVariable: server.password]) }

    /// An output as a number (an expression's result may come back as text).
    static func number(_ value: JSONValue?) -> Int64? { value?.intValue ?? value?.stringValue.flatMap { Int64($0) } }

    /// The outputs of the step `move` in the run whose events `result` printed.
    static func stepOutputs(_ runner: Runner, _ result: ProcessResult) throws -> JSONValue? {
        let runs = Runner.events(result.stdout).compactMap { $0["run"]?.stringValue }
        let run = try #require(runs.first)
        return try runner.status(run)["steps"]?.arrayValue?.last { $0["id"]?.stringValue == "move" }?["outputs"]
    }

    static func failure(_ result: ProcessResult) -> JSONValue? {
        Runner.events(result.stdout).ofType("step.failed", step: "move").last?["data"]
    }

    @Test func aTreeAndAFileGoUpAndComeBackByteIdentical() throws {
        let server = try PyFTPServer()
        let runner = FTPSTests.runner(server)
        let tree = runner.path("tree")
        try Trees.make(tree, big: 3 << 20)
        try FileManager.default.createDirectory(atPath: tree + "/d/empty", withIntermediateDirectories: true)

        let up = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.upload",
                                                   with: "source: \"\(tree)\", destination: in/tree, remote_root: drop, create_root: true"))
        #expect(up.status == 0, "\(up.stdout)\n\(up.stderr)")
        #expect(Trees.files(server.root + "/drop/in/tree") == Trees.files(tree))
        #expect(FileManager.default.fileExists(atPath: server.root + "/drop/in/tree/d/empty"), "an empty folder is made too")
        #expect(!Trees.files(server.root).keys.contains { $0.hasSuffix(".partial") }, "every partial was renamed into place")
        #expect(server.transfers("STOR", endingWith: "big.bin.partial").count == 1)
        #expect(!up.stdout.contains(server.password) && !up.stderr.contains(server.password), "the password never shows")
        // Nor in the journal: events, outputs, checkpoints (every file of the state directory).
        let secret = Data(server.password.utf8)
        let stored = FileManager.default.enumerator(atPath: runner.state)?.compactMap { $0 as? String } ?? []
        #expect(!stored.isEmpty)
        for name in stored {
            #expect(FileManager.default.contents(atPath: runner.state + "/" + name)?.range(of: secret) == nil, "the password is in \(name)")
        }

        let file = runner.path("one.bin")
        try Tools.randomFile(file, bytes: 1 << 20)
        let sha = try Tools.sha256(file)
        let single = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.upload",
                                                       with: "source: \"\(file)\", destination: in/one.bin, remote_root: drop, sha256: \(sha)",
                                                       name: "one.yaml"))
        #expect(single.status == 0, "\(single.stdout)")
        #expect(try Tools.sha256(server.root + "/drop/in/one.bin") == sha)

        let back = runner.path("back")
        let down = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.download",
                                                     with: "source: in/tree, destination: \"\(back)\", remote_root: drop", name: "down.yaml"))
        #expect(down.status == 0, "\(down.stdout)")
        #expect(Trees.files(back) == Trees.files(tree))
        #expect(FileManager.default.fileExists(atPath: back + "/d/empty"))
        let downloaded = Runner.events(down.stdout).runOutputs
        #expect(FTPSTests.number(downloaded?["files"]) == Int64(Trees.files(tree).count), "\(String(describing: downloaded))")
        #expect(try FTPSTests.stepOutputs(runner, down)?.objectValue?.keys.sorted() == ["bytes", "files", "path", "resumed_bytes"])

        let oneBack = runner.path("one-back.bin")
        let downOne = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.download",
                                                        with: "source: in/one.bin, destination: \"\(oneBack)\", remote_root: drop, sha256: \(sha)",
                                                        name: "down-one.yaml"))
        #expect(downOne.status == 0, "\(downOne.stdout)")
        #expect(try Tools.sha256(oneBack) == sha)
        // sha256 is an output only where the input asked for it.
        let oneOutputs = try FTPSTests.stepOutputs(runner, downOne)
        #expect(oneOutputs?.objectValue?.keys.sorted() == ["bytes", "files", "path", "resumed_bytes", "sha256"])
        #expect(oneOutputs?["sha256"]?.stringValue == sha)
    }

    /// A tree moves `concurrency` files at a time, each worker over a login of its own (the
    /// server's log counts the logins); `concurrency: 1` moves it over one.
    @Test func aTreeMovesOverOneLoginPerWorker() throws {
        let server = try PyFTPServer()
        let runner = FTPSTests.runner(server)
        let tree = runner.path("tree")
        try FileManager.default.createDirectory(atPath: tree + "/sub", withIntermediateDirectories: true)
        for i in 0 ..< 8 { try Tools.randomFile(tree + "/sub/f\(i).bin", bytes: 200_000) }
        func logins() -> Int { ((try? String(contentsOfFile: server.log, encoding: .utf8)) ?? "").components(separatedBy: "logged in.").count - 1 }

        let parallel = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.upload",
                                                         with: "source: \"\(tree)\", destination: four, concurrency: 3"))
        #expect(parallel.status == 0, "\(parallel.stdout)")
        #expect(Trees.files(server.root + "/four") == Trees.files(tree))
        #expect(logins() == 3, "one login per worker")

        let before = logins()
        let back = runner.path("back")
        let down = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.download",
                                                     with: "source: four, destination: \"\(back)\", concurrency: 1", name: "down.yaml"))
        #expect(down.status == 0, "\(down.stdout)")
        #expect(Trees.files(back) == Trees.files(tree))
        #expect(logins() - before == 1, "concurrency 1: the whole tree over one login")
    }

    /// `kill -9` while the second file of a tree is on its way up, then `resume`: the partial on
    /// the server is continued with APPE from its SIZE, every file arrives byte-identical, and
    /// the server received each file's bytes once (the aborted STOR plus the APPE make the size).
    @Test func killNineDuringATreeUploadThenResumeAppendsTheRest() throws {
        let server = try PyFTPServer()
        let runner = FTPSTests.runner(server)
        let tree = runner.path("tree")
        let big = 6 << 20
        try Trees.make(tree, big: big)
        let wf = FTPSTests.workflow(runner, server, uses: "ftp.upload",
                                    with: "source: \"\(tree)\", destination: tree, max_rate: 2M")
        let process = try runner.start(wf)
        let partial = server.root + "/tree/a/big.bin.partial"
        let reached = Tools.waitFor(60) { Tools.size(partial) >= 1 << 20 }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(reached)
        let atKill = Tools.size(partial)
        #expect(atKill > 0 && atKill < big, "the kill came mid-file (\(atKill) bytes)")
        let run = try #require(try runner.runIDs().last)
        #expect(try runner.status(run)["status"]?.stringValue == "interrupted")

        let resumed = try runner.orchestrate(["resume", run])
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        #expect(Trees.files(server.root + "/tree") == Trees.files(tree))
        let stored = server.transfers("STOR", endingWith: "big.bin.partial")
        let appended = server.transfers("APPE", endingWith: "big.bin.partial")
        // The cut STOR may look complete to the server (FTP ends an upload by closing the data
        // connection): that is why files go up under a temporary name.
        #expect(stored.count == 1, "\(stored)")
        #expect(appended.count == 1 && appended.first?.completed == true, "\(appended)")
        let sent = (stored.first?.bytes ?? 0) + (appended.first?.bytes ?? 0)
        #expect(sent == Int64(big), "the server received \(sent) bytes for a \(big)-byte file")
        #expect((appended.first?.bytes ?? Int64(big)) < Int64(big), "the resume did not send the whole file again")
        // Files finished before the kill are not sent again, and every file the workers had
        // under way is continued, not sent again: each file's bytes went up once.
        #expect(server.transfers("STOR", endingWith: "empty.txt.partial").count <= 1)
        for (name, size) in [("c/second.bin", big / 2)] {
            let sent = (server.transfers("STOR", endingWith: name + ".partial") + server.transfers("APPE", endingWith: name + ".partial"))
                .reduce(Int64(0)) { $0 + $1.bytes }
            #expect(sent == Int64(size), "\(name): the server received \(sent) bytes for \(size)")
        }
        #expect((FTPSTests.number(try runner.status(run)["outputs"]?["resumed_bytes"]) ?? 0) >= Int64(atKill))
    }

    /// `kill -9` while a tree's big file comes down, then `resume`: REST from the local
    /// partial's size; the server's RETR after the resume sends only the rest.
    @Test func killNineDuringATreeDownloadThenResumeRestartsWithREST() throws {
        let server = try PyFTPServer()
        let runner = FTPSTests.runner(server)
        let big = 6 << 20
        try Trees.make(server.root + "/pub/tree", big: big)
        let back = runner.path("back")
        let wf = FTPSTests.workflow(runner, server, uses: "ftp.download",
                                    with: "source: tree, destination: \"\(back)\", remote_root: pub, max_rate: 2M")
        let process = try runner.start(wf)
        let partial = back + "/a/big.bin.partial"
        let reached = Tools.waitFor(60) { Tools.size(partial) >= 1 << 20 }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(reached)
        let run = try #require(try runner.runIDs().last)
        let atKill = Tools.size(partial)
        #expect(atKill > 0 && atKill < big, "the kill came mid-file (\(atKill) bytes)")

        let resumed = try runner.orchestrate(["resume", run])
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        #expect(Trees.files(back) == Trees.files(server.root + "/pub/tree"))
        let retrieved = server.transfers("RETR", endingWith: "a/big.bin")
        #expect(retrieved.count == 2, "\(retrieved)")
        let after = retrieved.last?.bytes ?? -1
        #expect(after == Int64(big - atKill), "the resumed RETR sent \(after) bytes; the partial held \(atKill) of \(big)")
        #expect(try String(contentsOfFile: server.log, encoding: .utf8).contains("REST \(atKill)"))
    }

    @Test func anUntrustedCertificateIsRefusedWithAClearMessage() throws {
        let server = try PyFTPServer()
        let runner = FTPSTests.runner(server)
        let file = runner.path("f.bin")
        try Tools.randomFile(file, bytes: 1000)
        let result = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.upload", with: "source: \"\(file)\", destination: f.bin",
                                                       caFile: false))
        #expect(result.status == 1)
        let failed = try #require(FTPSTests.failure(result))
        #expect(failed["code"]?.stringValue == "tls_verification_failed")
        #expect(failed["kind"]?.stringValue == "permanent")
        let message = failed["error"]?.stringValue ?? ""
        #expect(message.contains("TLS certificate verification failed for 127.0.0.1:\(server.port)"), "\(message)")
        #expect(message.contains("ca_file"))
        #expect(Runner.events(result.stdout).ofType("step.retrying").isEmpty, "a refused certificate is not retried")
        #expect(!FileManager.default.fileExists(atPath: server.root + "/f.bin.partial"), "nothing was sent")
        #expect(!result.stdout.contains(server.password))
    }

    /// A server without TLS: refused by default (the password would travel in clear), accepted
    /// with `tls: none` written, which logs a warning saying so.
    @Test func plainFTPIsRefusedByDefaultAndUsedOnlyWhenAskedForByName() throws {
        let server = try PyFTPServer(plain: true)
        let runner = FTPSTests.runner(server)
        let file = runner.path("f.bin")
        try Tools.randomFile(file, bytes: 100_000)
        let refused = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.upload", with: "source: \"\(file)\", destination: f.bin"))
        #expect(refused.status == 1)
        let failed = try #require(FTPSTests.failure(refused))
        #expect(failed["code"]?.stringValue == "tls_unavailable", "\(failed)")
        let message = failed["error"]?.stringValue ?? ""
        #expect(message.contains("does not offer TLS") && message.contains("tls: none"), "\(message)")
        #expect(!FileManager.default.fileExists(atPath: server.root + "/f.bin"))
        #expect(!(try String(contentsOfFile: server.log, encoding: .utf8)).contains("logged in"), "no login was made in clear")

        let plain = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.upload", with: "source: \"\(file)\", destination: f.bin, tls: none",
                                                      name: "plain.yaml"))
        #expect(plain.status == 0, "\(plain.stdout)")
        #expect(Tools.size(server.root + "/f.bin") == 100_000)
        let warnings = Runner.events(plain.stdout).ofType("step.log", step: "move").filter { $0["data"]?["level"]?.stringValue == "warn" }
        #expect(warnings.contains { $0["data"]?["message"]?.stringValue?.contains("travel in clear") == true }, "\(warnings)")
    }

    /// A server listing an entry named `../x`: the download is refused, naming it, and nothing
    /// is written beside the destination folder.
    @Test func aListingEntryNamedDotDotSlashXIsRefused() throws {
        let server = try PyFTPServer(arguments: ["--hostile-name", "../x"])
        let runner = FTPSTests.runner(server)
        try FileManager.default.createDirectory(atPath: server.root + "/tree", withIntermediateDirectories: true)
        try Tools.randomFile(server.root + "/tree/fine.bin", bytes: 1000)
        let back = runner.path("out/back")
        let result = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.download", with: "source: tree, destination: \"\(back)\""))
        #expect(result.status == 1)
        let failed = try #require(FTPSTests.failure(result))
        #expect(failed["code"]?.stringValue == "bad_remote_name", "\(failed)")
        #expect(failed["error"]?.stringValue?.contains("\"../x\"") == true, "\(failed)")
        #expect(!FileManager.default.fileExists(atPath: runner.path("out/x")))
        #expect(!FileManager.default.fileExists(atPath: runner.path("out/x.partial")))
    }

    /// A listing past its bounds ends the tree download with a clear error before anything is
    /// fetched: a tree deeper than 200 folders (`tree_too_deep`: a server may list a folder in
    /// every folder), a folder holding more entries than `max_files` (`listing_too_large`).
    @Test func aListingPastItsBoundsIsRefused() throws {
        let server = try PyFTPServer()
        let runner = FTPSTests.runner(server)
        let deep = server.root + "/deep/" + Array(repeating: "d", count: 201).joined(separator: "/")
        try FileManager.default.createDirectory(atPath: deep, withIntermediateDirectories: true)
        try Tools.randomFile(deep + "/bottom.bin", bytes: 10)
        try FileManager.default.createDirectory(atPath: server.root + "/wide", withIntermediateDirectories: true)
        for i in 0..<30 { try Tools.randomFile(server.root + "/wide/f\(i)", bytes: 10) }
        for (source, extra, code) in [("deep", "", "tree_too_deep"), ("wide", ", max_files: 20", "listing_too_large")] {
            let result = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.download",
                                                           with: "source: \(source), destination: \"\(runner.path("out/\(source)"))\"\(extra)",
                                                           name: "\(source).yaml"))
            #expect(result.status == 1)
            let failed = try #require(FTPSTests.failure(result))
            #expect(failed["code"]?.stringValue == code && failed["kind"]?.stringValue == "permanent", "\(failed)")
            #expect(!FileManager.default.fileExists(atPath: runner.path("out/\(source)")), "nothing fetched")
        }
        // Within the bound, the same wide folder comes down.
        let fine = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.download",
                                                     with: "source: wide, destination: \"\(runner.path("out/fine"))\", max_files: 30", name: "fine.yaml"))
        #expect(fine.status == 0, "\(fine.stdout.suffix(2000))")
    }

    /// A file whose name starts with a combining mark, so that its listing line's separating
    /// space and that mark form one Swift character, and holds "facts" of its own: its MLSD line
    /// is read at the first space byte, so it comes down as the file it is (not as a folder "y").
    @Test func aNameThatLooksLikeListingFactsComesDownAsItself() throws {
        let server = try PyFTPServer()
        let runner = FTPSTests.runner(server)
        try FileManager.default.createDirectory(atPath: server.root + "/tree", withIntermediateDirectories: true)
        try Tools.randomFile(server.root + "/tree/fine.bin", bytes: 1000)
        let odd = "\u{301}x;type=dir; y"
        // POSIX calls: Foundation's own path handling splits such a name by characters.
        let fd = open(server.root + "/tree/" + odd, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        #expect(fd >= 0 && write(fd, "odd bytes", 9) == 9)
        close(fd)
        let back = runner.path("out/back")
        let result = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.download", with: "source: tree, destination: \"\(back)\""))
        #expect(result.status == 0, "\(String(describing: FTPSTests.failure(result)))")
        var info = stat()
        #expect(lstat(back + "/" + odd, &info) == 0 && info.st_size == 9, "the file under its own name")
        #expect(lstat(back + "/y", &info) != 0)
    }

    /// A server whose PASV reply names another address (127.0.0.2, where nothing listens) and
    /// that refuses EPSV: the data connection still goes to the control connection's host.
    @Test func aPASVReplyCannotAimTheDataConnectionElsewhere() throws {
        let server = try PyFTPServer(arguments: ["--no-epsv", "--pasv-address", "127.0.0.2"])
        let runner = FTPSTests.runner(server)
        let file = runner.path("f.bin")
        try Tools.randomFile(file, bytes: 200_000)
        let result = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.upload", with: "source: \"\(file)\", destination: f.bin"))
        #expect(result.status == 0, "\(result.stdout)")
        #expect(Trees.sameBytes(file, server.root + "/f.bin"))
        #expect(try String(contentsOfFile: server.log, encoding: .utf8).contains("PASV"), "the client had to use PASV")
    }

    /// A data connection that cannot be made while the control connection works is an error that
    /// spends attempts, not an unreachable host: the engine would hold the step and probe a port
    /// that answers, for ever.
    @Test func aDataConnectionThatFailsIsRetriedNotHeld() throws {
        let server = try PyFTPServer(arguments: ["--dead-data-port"])
        let runner = FTPSTests.runner(server)
        let file = runner.path("f.bin")
        try Tools.randomFile(file, bytes: 1000)
        let process = try runner.start(FTPSTests.workflow(runner, server, uses: "ftp.upload", with: "source: \"\(file)\", destination: f.bin"))
        let ended = Tools.waitFor(30) { !process.isRunning }
        if !ended { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        #expect(ended, "the run did not end: the step was held as unreachable")
        let events = Runner.events((try? String(contentsOfFile: runner.path("events.jsonl"), encoding: .utf8)) ?? "")
        let failed = events.ofType("step.failed", step: "move").last?["data"]
        #expect(failed?["code"]?.stringValue == "data_connection_failed", "\(String(describing: failed))")
        #expect(failed?["attempt"]?.intValue == 2)
    }

    /// A server that does not answer on FTP's own port (nothing listens on 127.0.0.1:21 here):
    /// the step names no `port`, yet it is held and its host probed on 21 (990 with `tls:
    /// implicit`), until `hold_timeout` gives up saying which endpoint did not answer.
    @Test func aStepWithoutAPortIsHeldOnFTPsDefaultPort() throws {
        let runner = Runner(environment: [:])
        let file = runner.path("f.bin")
        try Tools.randomFile(file, bytes: 10)
        for (tls, port) in [("explicit", 21), ("implicit", 990)] {
            let result = try runner.run(runner.workflow("""
                version: 1
                name: ftp-hold
                steps:
                  move:
                    uses: ftp.upload
                    retry: { max_attempts: 1 }
                    hold_timeout: 2s
                    with: { host: 127.0.0.1, tls: \(tls), source: "\(file)", destination: f.bin }
                """, name: "\(tls).yaml"))
            #expect(result.status == 1)
            let events = Runner.events(result.stdout)
            #expect(events.ofType("step.held", step: "move").count == 1, "refused on \(port): held, not failed at once")
            let failed = try #require(FTPSTests.failure(result))
            #expect(failed["code"]?.stringValue == "unreachable" && failed["kind"]?.stringValue == "timeout", "\(failed)")
            #expect(failed["error"]?.stringValue?.contains("127.0.0.1:\(port) did not answer") == true, "\(failed)")
        }
    }

    @Test func aRemotePathClimbingOutOfRemoteRootIsRefused() throws {
        let server = try PyFTPServer()
        let runner = FTPSTests.runner(server)
        let file = runner.path("f.bin")
        try Tools.randomFile(file, bytes: 10)
        let result = try runner.run(FTPSTests.workflow(runner, server, uses: "ftp.upload",
                                                       with: "source: \"\(file)\", destination: ../../etc/f.bin, remote_root: drop"))
        #expect(result.status == 1)
        let failed = try #require(FTPSTests.failure(result))
        #expect(failed["code"]?.stringValue == "path_escape", "\(failed)")
    }

    /// A login that would smuggle a second command into USER or PASS (`name\r\nDELE f`) is refused
    /// before anything is sent, whichever of the two holds it.
    @Test func aLineBreakInTheLoginIsRefused() throws {
        let server = try PyFTPServer()
        let runner = Runner(environment: [FTPSTests.passwordVariable: server.password + "\r\nDELE f.bin"])
        try Tools.randomFile(server.root + "/f.bin", bytes: 10)
        for (user, password) in [("\(server.user)\\r\nDELE f.bin", "\"${{ secrets.password }}\""), (server.user, "\"${{ secrets.password }}\"")] {
            let file = runner.workflow("""
                version: 1
                name: ftp
                secrets: { password: { env: \(FTPSTests.passwordVariable) } }
                steps:
                  move:
                    uses: ftp.download
                    with: { host: 127.0.0.1, port: \(server.port), user: "\(user)", password: \(password),
                            ca_file: "\(server.certificate.cert)", source: f.bin, destination: "\(runner.path("f.bin"))" }
                """)
            let result = try runner.run(file)
            #expect(result.status == 1)
            let failed = try #require(FTPSTests.failure(result))
            #expect(failed["code"]?.stringValue == "bad_login", "\(failed)")
        }
        #expect(FileManager.default.fileExists(atPath: server.root + "/f.bin"))
        #expect(!FileManager.default.fileExists(atPath: runner.path("f.bin")))
    }
}
