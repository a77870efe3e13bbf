import Foundation
import OrchestrateTestSupport
import Testing

/// State another user could have planted or can change is refused, as OpenSSH refuses loose key
/// files: a state directory, store file or token file owned by another user (`nobody` here;
/// the tests run as root) or writable by others, and a token file others can read. Exit status
/// 2 and a message that says how to fix it. Root's group (gid 0) may write: its members are root.
@Suite(.serialized) struct PlantedStateTests {
    let h = Harness()
    static let nobody: uid_t = 65534
    static let nogroup: gid_t = 65534

    /// A state directory made by `list` (0700, ours), to spoil.
    func madeState() throws -> String {
        let made = try h.orchestrate(["list"])
        #expect(made.status == 0, "\(made.stderr)")
        // On a PostgreSQL store the state directory holds only run directories and the token:
        // `list` does not make it.
        try FileManager.default.createDirectory(atPath: h.state, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        return h.state
    }

    /// Runs the command (cut at 20 s, killed 5 s later: a `serve` that was not refused would run
    /// on, and an `open` stuck on a FIFO does not end at SIGTERM) and expects
    /// exit status 2 with `message`.
    func expectRefused(_ command: [String], _ message: String, environment: [String: String] = [:],
                       sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/timeout"),
                                          ["-k", "5", "20", TestPaths.orchestrate.path] + command + h.baseArguments,
                                          environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
        #expect(result.status == 2, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(message), "\(result.stderr)", sourceLocation: sourceLocation)
    }

    @Test func aStateDirectoryOfAnotherUserIsRefused() throws {
        guard h.storeURL == nil else { return }
        let state = try madeState()
        #expect(chown(state, Self.nobody, Self.nogroup) == 0)
        try expectRefused(["list"], "orchestrate refuses the state directory \(state): it belongs to nobody (uid 65534), "
            + "not to the current user root (uid 0), so that user could have planted it or can change it; "
            + "use one of your own, or fix with chown 0 \(state)")
        try expectRefused(["serve"], "orchestrate refuses the state directory \(state)")
        try expectRefused(["submit", h.workflow("version: 1\nname: w\nsteps:\n  a: { uses: test.noop }\n")],
                          "orchestrate refuses the state directory \(state)")
        #expect(chown(state, 0, 0) == 0)
        #expect(try h.orchestrate(["list"]).status == 0)
    }

    @Test func aStateDirectoryOthersCanWriteIsRefused() throws {
        guard h.storeURL == nil else { return }
        let state = try madeState()
        #expect(chmod(state, 0o777) == 0)
        try expectRefused(["list"], "orchestrate refuses the state directory \(state): it is writable by every user (mode 777); "
            + "fix with chmod 700 \(state)")
        #expect(chmod(state, 0o770) == 0 && chown(state, 0, Self.nogroup) == 0)
        try expectRefused(["list"], "it is writable by group nogroup (gid 65534) (mode 770); fix with chmod 700 \(state)")
        // Root's own group may write: the rule accepts it.
        #expect(chown(state, 0, 0) == 0)
        #expect(try h.orchestrate(["list"]).status == 0)
        // Readable by others is fine for the directory (the database itself is 0600).
        #expect(chmod(state, 0o755) == 0)
        #expect(try h.orchestrate(["list"]).status == 0)
    }

    @Test func aStoreFileOfAnotherUserIsRefused() throws {
        guard h.storeURL == nil else { return }
        let state = try madeState()
        #expect(chown(state + "/state.sqlite", Self.nobody, Self.nogroup) == 0)
        try expectRefused(["list"], "orchestrate refuses the store file \(state)/state.sqlite: it belongs to nobody (uid 65534)")
        #expect(chown(state + "/state.sqlite", 0, 0) == 0 && chmod(state + "/state.sqlite", 0o666) == 0)
        try expectRefused(["list"], "orchestrate refuses the store file \(state)/state.sqlite: it is writable by every user (mode 666)")
    }

    /// `serve --http` with a planted `http-token`: refused before anything listens, so the
    /// planted token never drives it.
    @Test func aPlantedOrLooseTokenFileIsRefused() throws {
        let state = try madeState()
        let token = state + "/http-token"
        let http = ["serve", "--http", "127.0.0.1:\(Ports.free())"]
        #expect(FileManager.default.createFile(atPath: token, contents: Data("planted-0123456789abcdef\n".utf8),
                                               attributes: [.posixPermissions: 0o600]))
        #expect(chown(token, Self.nobody, Self.nogroup) == 0)
        try expectRefused(http, "orchestrate refuses the token file \(token): it belongs to nobody (uid 65534)")
        #expect(chown(token, 0, 0) == 0 && chmod(token, 0o644) == 0)
        try expectRefused(http, "orchestrate refuses the token file \(token): it is readable or writable by others (mode 644); "
            + "a token must be private to its owner: fix with chmod 600 \(token)")
        #expect(chmod(token, 0o600) == 0)
        // --http-token-file too.
        let extra = h.dir.write("tokens", "reader read reader-0123456789abcdef\n").path
        #expect(chmod(extra, 0o640) == 0)
        try expectRefused(http + ["--http-token-file", extra], "orchestrate refuses the token file \(extra): it is readable or writable by others (mode 640)")
    }

    /// A FIFO planted where a token file or the remotes file is expected would hang `open`
    /// until a writer came (and that writer would choose what is read): refused at once, and
    /// the same for a device. `timeout` in `expectRefused` would turn a hang into status 124.
    @Test func aFIFOOrDeviceInPlaceOfATokenOrRemotesFileIsRefusedWithoutWaiting() throws {
        let state = try madeState()
        let token = state + "/http-token"
        #expect(mkfifo(token, 0o600) == 0)
        let http = ["serve", "--http", "127.0.0.1:\(Ports.free())"]
        try expectRefused(http, "orchestrate refuses the token file \(token): it is not a regular file")
        // A link to nowhere is neither read nor replaced through (nor tried again until the stack ends).
        #expect(unlink(token) == 0 && symlink(h.path("nowhere"), token) == 0)
        try expectRefused(http, "orchestrate refuses the token file \(token): it is a link to a file that does not exist")
        #expect(!FileManager.default.fileExists(atPath: h.path("nowhere")))
        #expect(unlink(token) == 0)
        let extra = h.path("tokens")
        #expect(mkfifo(extra, 0o600) == 0)
        try expectRefused(http + ["--http-token-file", extra], "orchestrate refuses the token file \(extra): it is not a regular file")

        let config = h.path("config")
        try FileManager.default.createDirectory(atPath: config + "/orchestrate", withIntermediateDirectories: true)
        let remotes = config + "/orchestrate/remotes.yaml"
        #expect(mkfifo(remotes, 0o600) == 0)
        try expectRefused(["remote", "list"], "orchestrate refuses the remotes file \(remotes): it is not a regular file",
                          environment: ["XDG_CONFIG_HOME": config])
        #expect(unlink(remotes) == 0 && symlink("/dev/zero", remotes) == 0)
        try expectRefused(["remote", "list"], "orchestrate refuses the remotes file \(remotes): it is not a regular file",
                          environment: ["XDG_CONFIG_HOME": config])
        // A regular file of its own, private, is read.
        #expect(unlink(remotes) == 0)
        #expect(FileManager.default.createFile(atPath: remotes, contents: Data("remotes:\n  box: { type: sftp, host: example.net, user: u }\n".utf8),
                                               attributes: [.posixPermissions: 0o600]))
        let listed = try h.orchestrate(["remote", "list"], environment: ["XDG_CONFIG_HOME": config])
        #expect(listed.status == 0 && listed.stdout.contains("box"), "\(listed.stdout)\n\(listed.stderr)")
    }
}
