import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// How a tree's small files reach the server, seen from the server's side: spread over
/// `connections` connections (each its own sftp-server process, read from each one's log), a
/// fresh file's partial created O_EXCL with no LSTAT before it, every file still fsynced before
/// its rename; its times, fsync and close sent behind the write without waiting for its answer
/// (tools/sftp_size_liar.py's trace); and a refused write or fsync, answered while the requests
/// behind it were already sent, still fails the file: nothing renamed into place, nothing done.
@Suite(.serialized) struct TreeConnectionsTests {
    let h = Harness()

    /// A server whose sftp-server processes each log (VERBOSE: every open, lstat, fsync, rename)
    /// to a file of their own in `logs`.
    func loggingPeer() throws -> (SSHDPeer, String) {
        let logs = h.path("sftp-server-logs")
        try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
        let wrapper = h.dir.write("sftp-server.sh", """
            #!/bin/sh
            exec /usr/lib/openssh/sftp-server -e -l VERBOSE 2>>"\(logs)/$$.log"
            """).path
        chmod(wrapper, 0o755)
        return (try SSHDPeer(sftpSubsystem: wrapper), logs)
    }

    func liar(_ lie: String) throws -> SSHDPeer {
        let tool = TestPaths.packageRoot.appendingPathComponent("tools/sftp_size_liar.py").path
        return try SSHDPeer(sftpSubsystem: "/usr/bin/python3 \(tool) \(lie) /usr/lib/openssh/sftp-server")
    }

    /// `count` frames of 1–4 KiB in two folders.
    func frames(_ count: Int) -> String {
        let tree = h.path("frames")
        for i in 0 ..< count {
            Harness.randomFile("\(tree)/shot\(i % 2)/frame_\(String(format: "%04d", i)).dpx", size: 1000 + (i * 97) % 3000, seed: UInt64(i + 1))
        }
        return tree
    }

    func upload(_ peer: SSHDPeer, tree: String, destination: String, extra: String) throws -> ProcessResult {
        let wf = h.workflow("""
            version: 1
            name: frames
            steps:
              up:
                uses: sftp.upload
                with:
                  source: \(tree)
                  destination: \(destination)
                  remote_root: \(peer.remoteRoot)
                  \(extra)
                  \(peer.connection(knownHosts: try peer.knownHosts()))
            """, name: "\(destination).yaml")
        return try h.orchestrate(["run", wf, "--json"])
    }

    /// Every complete file under `root` (partials left out), relative.
    static func files(_ root: String) -> [String] {
        (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []).filter {
            $0.hasSuffix(".dpx")
        }
    }

    /// Per sftp-server process (one per connection), its log lines that match `pattern`.
    static func lines(_ logs: String, matching pattern: String) -> [[String]] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: logs)) ?? []
        return names.sorted().map { name in
            let text = (try? String(contentsOfFile: "\(logs)/\(name)", encoding: .utf8)) ?? ""
            return text.split(whereSeparator: \.isNewline).map(String.init).filter { $0.range(of: pattern, options: .regularExpression) != nil }
        }
    }

    @Test func aTreesSmallFilesAreSpreadOverItsConnectionsEachFsyncedWithoutAnLstat() throws {
        let (peer, logs) = try loggingPeer()
        let count = 400
        let tree = frames(count)
        let result = try upload(peer, tree: tree, destination: "spread", extra: "connections: 4\n      parallel: 8")
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        #expect(Self.files("\(peer.remoteRoot)/spread").count == count)
        // The fresh partials, O_EXCL, per server process: every one opened once, by four.
        let opens = Self.lines(logs, matching: #"open ".*/spread/shot[01]/frame_[0-9]+\.dpx\.partial" flags WRITE,CREATE,EXCL"#).map(\.count)
        #expect(opens.reduce(0, +) == count, "opens per sftp-server: \(opens)")
        // Four connections opened; which of them moved how many files depends on how soon each
        // was up (on a loaded machine the first ones can take every file before the last
        // connects), so only the spread itself is asserted: more than the shared connection.
        #expect(opens.count == 4, "sftp-server processes: \(opens.count), files per sftp-server: \(opens)")
        #expect(opens.filter { $0 > 0 }.count >= 2, "files per sftp-server: \(opens)")
        // Durable as before: each file fsynced (and renamed) once; no LSTAT of a fresh partial.
        let fsyncs = Self.lines(logs, matching: #"fsync ".*/spread/.*\.partial""#).map(\.count).reduce(0, +)
        #expect(fsyncs == count)
        let renames = Self.lines(logs, matching: #"rename old ".*/spread/.*\.partial""#).map(\.count).reduce(0, +)
        #expect(renames == count)
        let lstats = Self.lines(logs, matching: #"lstat name ".*\.partial""#).map(\.count).reduce(0, +)
        #expect(lstats == 0, "\(lstats) LSTATs of partials")
        for i in stride(from: 0, to: count, by: 37) {
            let name = "shot\(i % 2)/frame_\(String(format: "%04d", i)).dpx"
            #expect(Harness.sameBytes("\(tree)/\(name)", "\(peer.remoteRoot)/spread/\(name)"), "\(name)")
        }
    }

    @Test func oneConnectionKeepsEveryFileOnIt() throws {
        let (peer, logs) = try loggingPeer()
        let tree = frames(100)
        let result = try upload(peer, tree: tree, destination: "one", extra: "connections: 1")
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        let opens = Self.lines(logs, matching: #"open ".*/one/.*\.partial" flags WRITE,CREATE,EXCL"#).map(\.count).filter { $0 > 0 }
        #expect(opens == [100], "files per sftp-server: \(opens)")
    }

    /// The times, fsync and close of a file of one write go out behind that write, before its
    /// answer (which the server holds back 0.1 s): one round trip for the four.
    @Test func aSmallFilesFsyncAndCloseDoNotWaitForItsWrite() throws {
        let trace = h.path("trace.log")
        let peer = try liar("trace:\(trace)")
        let tree = frames(6)
        let result = try upload(peer, tree: tree, destination: "piped", extra: "connections: 1\n      parallel: 1")
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        let lines = ((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "").split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        let writes = lines.filter { $0.count == 3 && $0[0] == "req" && $0[1] == "6" }.map { $0[2] }
        #expect(writes.count == 6)
        for id in writes {
            let sent = try #require(lines.firstIndex { $0 == ["req", "6", id] })
            let answered = try #require(lines.firstIndex { $0 == ["rep", id] })
            let between = lines[sent ..< answered].map { $0.count == 3 && $0[0] == "req" ? $0[1] : "" }
            #expect(between.contains("fsync@openssh.com") && between.contains("4"), "write \(id): before its answer came only \(between)")
        }
    }

    /// A refused write or fsync, its answer read after the requests behind it were sent: the
    /// step fails, no file is renamed into place, the checkpoint counts nothing done.
    @Test(arguments: [("refuse-write", "write "), ("refuse-fsync", "fsync ")])
    func aRefusedPipelinedRequestFailsTheFileAndNothingIsDone(lie: (String, String)) throws {
        let peer = try liar(lie.0)
        let tree = frames(5)
        let result = try upload(peer, tree: tree, destination: "refused", extra: "connections: 1")
        #expect(result.status == 1, "\(result.stdout.suffix(2000))")
        #expect(result.stdout.contains(lie.1) && result.stdout.contains("refused by the test server"), "\(result.stdout.suffix(2000))")
        #expect(Self.files("\(peer.remoteRoot)/refused").isEmpty, "renamed into place: \(Self.files("\(peer.remoteRoot)/refused"))")
        let saved = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), [h.state + "/state.sqlite", "SELECT data FROM checkpoints"])
        for line in saved.stdout.split(separator: "\n") {
            let checkpoint = try JSONValue(parsing: String(line))
            #expect((checkpoint["done"]?.intValue ?? 0) == 0 && checkpoint["ranges"] == nil, "checkpoint: \(line)")
        }
    }
}
