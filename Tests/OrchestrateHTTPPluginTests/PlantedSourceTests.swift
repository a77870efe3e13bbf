import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// An upload's source in a folder others can write (a hot folder): what another user planted
/// under the name it was handed is not uploaded. A link of theirs to this user's key fails with
/// `untrusted_link`, a FIFO with `not_a_file` at once (it used to hold the open until a writer
/// came), and nothing reaches the server. The uploads of every plugin open their source the
/// same way (`LocalFile(reading:)`); `FSPluginTests` covers the walk's other cases.
@Suite(.serialized) struct PlantedSourceTests {
    @Test func aPlantedLinkOrFIFOIsNotUploaded() throws {
        let nginx = try Nginx()
        let runner = Runner()
        let key = runner.path("id_ed25519")
        try Data("PRIVATE KEY".utf8).write(to: URL(fileURLWithPath: key))
        let hot = runner.path("hot")
        try FileManager.default.createDirectory(atPath: hot, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o777])
        #expect(symlink(key, hot + "/take.mov") == 0 && lchown(hot + "/take.mov", 65534, 65534) == 0)
        #expect(mkfifo(hot + "/pipe.mov", 0o666) == 0)
        for (name, code) in [("take.mov", "untrusted_link"), ("pipe.mov", "not_a_file")] {
            let file = runner.workflow("""
                version: 1
                name: planted
                steps:
                  up:
                    uses: http.upload
                    retry: { max_attempts: 1 }
                    timeout: 20s
                    with: { url: "\(nginx.base)/dav/in/\(name)", file: "\(hot)/\(name)", protocol: put }
                """)
            let before = nginx.accessLog.count
            let result = try runner.run(file)
            #expect(result.status == 1, "\(result.stdout.suffix(2000))")
            let failed = try #require(Runner.events(result.stdout).ofType("step.failed", step: "up").last?["data"])
            #expect(failed["code"]?.stringValue == code, "\(failed)")
            #expect(nginx.accessLog.count == before, "nothing reached the server: \(nginx.accessLog)")
        }
        // The user's own link to the same file goes.
        #expect(symlink(key, hot + "/own.mov") == 0)
        let own = runner.workflow("""
            version: 1
            name: own
            steps:
              up: { uses: http.upload, with: { url: "\(nginx.base)/dav/in/own.mov", file: "\(hot)/own.mov", protocol: put } }
            """)
        let sent = try runner.run(own)
        #expect(sent.status == 0, "\(sent.stdout.suffix(2000))")
    }

    /// A download into a folder others can write: a folder on the destination's way swapped for
    /// another user's link (towards `~/.ssh`, say) does not receive the bytes, nor the folders
    /// `mkdir -p` would make; the download fails with `untrusted_link` before it asks the server.
    @Test func aDownloadIsNotLedThroughAPlantedFolderLink() throws {
        let nginx = try Nginx()
        try Data("ssh-ed25519 AAAA attacker\n".utf8).write(to: URL(fileURLWithPath: nginx.www + "/keys"))
        let runner = Runner()
        let victim = runner.path("victim-ssh")
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let hot = runner.path("incoming")
        try FileManager.default.createDirectory(atPath: hot, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o777])
        #expect(symlink(victim, hot + "/show") == 0 && lchown(hot + "/show", 65534, 65534) == 0)
        for destination in ["\(hot)/show/authorized_keys", "\(hot)/show/new/deeper/authorized_keys"] {
            let file = runner.workflow("""
                version: 1
                name: planted-folder
                steps:
                  get:
                    uses: http.download
                    retry: { max_attempts: 1 }
                    with: { url: "\(nginx.base)/files/keys", destination: "\(destination)" }
                """)
            let before = nginx.accessLog.count
            let result = try runner.run(file)
            #expect(result.status == 1, "\(result.stdout.suffix(2000))")
            let failed = try #require(Runner.events(result.stdout).ofType("step.failed", step: "get").last?["data"])
            #expect(failed["code"]?.stringValue == "untrusted_link", "\(failed)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: victim).isEmpty, "nothing was made in the folder the link names")
            #expect(nginx.accessLog.count == before, "\(nginx.accessLog)")
        }
        // The user's own link to a folder is followed.
        #expect(symlink(victim, hot + "/mine") == 0)
        let own = runner.workflow("""
            version: 1
            name: own-folder
            steps:
              get: { uses: http.download, with: { url: "\(nginx.base)/files/keys", destination: "\(hot)/mine/keys" } }
            """)
        let got = try runner.run(own)
        #expect(got.status == 0, "\(got.stdout.suffix(2000))")
        #expect(FileManager.default.fileExists(atPath: victim + "/keys"))
    }

    /// The destination's folder renamed (and another put in its place) while a download writes
    /// into it: the file is not renamed into the moved folder while the outputs name a path
    /// where it is not; the step fails with `destination_moved`.
    @Test func aDestinationFolderMovedMidDownloadFailsTheStep() throws {
        let nginx = try Nginx()
        try Data(repeating: 0x41, count: 3 << 20).write(to: URL(fileURLWithPath: nginx.www + "/slow.bin"))
        let runner = Runner()
        let incoming = runner.path("incoming")
        try FileManager.default.createDirectory(atPath: incoming, withIntermediateDirectories: true)
        let file = runner.workflow("""
            version: 1
            name: moved-folder
            steps:
              get:
                uses: http.download
                retry: { max_attempts: 1 }
                with: { url: "\(nginx.base)/files/slow.bin", destination: "\(incoming)/slow.bin", max_rate: 1M }
            """)
        let process = try runner.start(file)
        #expect(Tools.waitFor { FileManager.default.fileExists(atPath: incoming + "/.slow.bin.part") }, "the download never started")
        #expect(rename(incoming, runner.path("moved")) == 0 && mkdir(incoming, 0o755) == 0)
        process.waitUntilExit()
        let events = Runner.events((try? String(contentsOfFile: runner.path("events.jsonl"), encoding: .utf8)) ?? "")
        let failed = try #require(events.ofType("step.failed", step: "get").last?["data"], "\(events)")
        #expect(failed["code"]?.stringValue == "destination_moved", "\(failed)")
        #expect(!FileManager.default.fileExists(atPath: runner.path("moved/slow.bin")))
        #expect(!FileManager.default.fileExists(atPath: incoming + "/slow.bin"))
    }
}
