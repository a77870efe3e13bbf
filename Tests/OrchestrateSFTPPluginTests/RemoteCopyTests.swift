import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `orchestrate copy` and `remote test` against a real sshd through an sftp remote of the
/// remotes file (key file, known_hosts, port and root written once), and a workflow whose steps
/// name the remote.
@Suite(.serialized) struct SFTPRemoteCopyTests {
    /// A harness whose remotes file (0600, in a private XDG_CONFIG_HOME) defines `edit-bay`.
    static func setUp(_ peer: SSHDPeer, _ h: Harness) throws -> [String: String] {
        let known = try peer.knownHosts()
        let config = h.path("config")
        try FileManager.default.createDirectory(atPath: config + "/orchestrate", withIntermediateDirectories: true)
        let file = config + "/orchestrate/remotes.yaml"
        try """
            remotes:
              edit-bay:
                type: sftp
                host: 127.0.0.1
                port: \(peer.port)
                user: \(peer.user)
                key_file: \(peer.userKey)
                known_hosts: \(known)
                remote_root: \(peer.remoteRoot)
            """.write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        return ["XDG_CONFIG_HOME": config]
    }

    static func orchestrate(_ h: Harness, _ env: [String: String], _ arguments: [String]) throws -> ProcessResult {
        try ChildProcess.orchestrate(arguments + ["--state", h.state], environment: env)
    }

    @Test func aFileAndATreeGoUpAndComeBackByteIdentical() throws {
        let peer = try SSHDPeer()
        let h = Harness()
        let env = try Self.setUp(peer, h)
        let file = Harness.randomFile(h.path("a.bin"), size: 5 << 20 + 3)
        Harness.randomFile(h.path("tree/one.bin"), size: 100_000, seed: 2)
        Harness.randomFile(h.path("tree/sub/two.bin"), size: 200_000, seed: 3)

        let up = try Self.orchestrate(h, env, ["copy", file, "edit-bay:incoming/"])
        #expect(up.status == 0, "\(up.stdout)\n\(up.stderr)")
        #expect(Harness.sameBytes(peer.remoteRoot + "/incoming/a.bin", file))
        let tree = try Self.orchestrate(h, env, ["copy", "--recursive", h.path("tree"), "edit-bay:incoming/tree"])
        #expect(tree.status == 0, "\(tree.stdout)\n\(tree.stderr)")
        #expect(Harness.sameBytes(peer.remoteRoot + "/incoming/tree/sub/two.bin", h.path("tree/sub/two.bin")))

        let down = try Self.orchestrate(h, env, ["copy", "edit-bay:incoming/a.bin", h.path("back.bin")])
        #expect(down.status == 0, "\(down.stdout)\n\(down.stderr)")
        #expect(Harness.sameBytes(h.path("back.bin"), file))
        let downTree = try Self.orchestrate(h, env, ["copy", "--recursive", "edit-bay:incoming/tree", h.path("back-tree")])
        #expect(downTree.status == 0, "\(downTree.stdout)\n\(downTree.stderr)")
        #expect(Harness.sameBytes(h.path("back-tree/one.bin"), h.path("tree/one.bin")))
        #expect(Harness.sameBytes(h.path("back-tree/sub/two.bin"), h.path("tree/sub/two.bin")))

        // --if-exists skip: the file is there already, nothing is sent again.
        let again = try Self.orchestrate(h, env, ["copy", "--if-exists", "skip", file, "edit-bay:incoming/a.bin", "--json"])
        #expect(again.status == 0, "\(again.stdout)\n\(again.stderr)")
        let run = try #require(try h.runIDs().last)
        let outputs = try h.status(run)["steps"]?.arrayValue?.first { $0["id"]?.stringValue == "copy" }?["outputs"]
        #expect(outputs?["skipped_files"]?.intValue == 1, "\(String(describing: outputs))")

        let tested = try Self.orchestrate(h, env, ["remote", "test", "edit-bay"])
        #expect(tested.status == 0 && tested.stdout.contains("edit-bay: ok"), "\(tested.stdout)\n\(tested.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: peer.remoteRoot).sorted() == ["incoming"], "the test wrote nothing")
    }

    @Test func aWorkflowStepNamesTheRemote() throws {
        let peer = try SSHDPeer()
        let h = Harness()
        let env = try Self.setUp(peer, h)
        let file = Harness.randomFile(h.path("a.bin"), size: 300_000)
        let flow = h.workflow("""
            version: 1
            name: by-remote
            steps:
              connect:
                uses: sftp.connect
                with: { remote: edit-bay }
              up:
                needs: [connect]
                uses: sftp.upload
                with: { remote: edit-bay, session: "${{ steps.connect.outputs.session }}", source: "\(file)", destination: drop/a.bin }
            """)
        let ran = try Self.orchestrate(h, env, ["run", flow])
        #expect(ran.status == 0, "\(ran.stdout)\n\(ran.stderr)")
        #expect(Harness.sameBytes(peer.remoteRoot + "/drop/a.bin", file))
    }

    @Test func aRemoteTestOfAMissingRootFails() throws {
        let peer = try SSHDPeer()
        let h = Harness()
        var env = try Self.setUp(peer, h)
        let file = env["XDG_CONFIG_HOME"]! + "/orchestrate/remotes.yaml"
        let text = try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(of: "remote_root: \(peer.remoteRoot)",
                                                                                          with: "remote_root: \(peer.remoteRoot)/nope")
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        env["NO_COLOR"] = "1"
        let tested = try Self.orchestrate(h, env, ["remote", "test", "edit-bay"])
        #expect(tested.status == 1, "\(tested.stdout)\n\(tested.stderr)")
        #expect(tested.stdout.contains("edit-bay: FAILED") && tested.stdout.contains("does not exist"), "\(tested.stdout)")
    }

    @Test func anSFTPURLGoesThroughTheSystemsSSHAndItsAgent() throws {
        let peer = try SSHDPeer()
        let h = Harness()
        // ~/.ssh/known_hosts is read from HOME; the key comes from an ssh-agent, as for `sftp user@host`.
        let home = h.path("home")
        try FileManager.default.createDirectory(atPath: home + "/.ssh", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: try peer.knownHosts(), toPath: home + "/.ssh/known_hosts")
        let socket = h.path("agent.sock")
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: "/usr/bin/ssh-agent")
        agent.arguments = ["-D", "-a", socket]
        agent.standardOutput = FileHandle.nullDevice
        agent.standardError = FileHandle.nullDevice
        try agent.run()
        defer {
            kill(agent.processIdentifier, SIGKILL)
            agent.waitUntilExit()
        }
        #expect(h.waitFor(10) { FileManager.default.fileExists(atPath: socket) })
        let env = ["SSH_AUTH_SOCK": socket, "HOME": home]
        let added = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/ssh-add"), [peer.userKey],
                                         environment: ProcessInfo.processInfo.environment.merging(env) { _, b in b })
        #expect(added.status == 0, "ssh-add: \(added.stderr)")
        let file = Harness.randomFile(h.path("u.bin"), size: 400_000)
        let url = "sftp://\(peer.user)@127.0.0.1:\(peer.port)\(peer.remoteRoot)/url/u.bin"
        let up = try Self.orchestrate(h, env, ["copy", file, url])
        #expect(up.status == 0, "\(up.stdout)\n\(up.stderr)")
        #expect(Harness.sameBytes(peer.remoteRoot + "/url/u.bin", file))
        let down = try Self.orchestrate(h, env, ["copy", url, h.path("d.bin")])
        #expect(down.status == 0, "\(down.stdout)\n\(down.stderr)")
        #expect(Harness.sameBytes(h.path("d.bin"), file))
    }
}
