import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `orchestrate copy` over FTPS: an ftp remote of the remotes file, its password from the
/// environment, against tools/ftps_server.py.
@Suite(.serialized) struct FTPCopyTests {
    static let passwordVariable = "FTP_REMOTE_PASSWORD"

    /// A runner with a remotes file (0600) defining `drop` on `server`, in a config folder kept
    /// as long as the runner.
    static func runner(_ server: PyFTPServer) throws -> (Runner, TemporaryDirectory) {
        let folder = TemporaryDirectory("ftp-remotes")
        let config = folder.path
        try FileManager.default.createDirectory(atPath: config + "/orchestrate", withIntermediateDirectories: true)
        let file = config + "/orchestrate/remotes.yaml"
        try """
            remotes:
              drop:
                type: ftp
                host: 127.0.0.1
                port: \(server.port)
                user: \(server.user)
                password: { env: \(passwordVariable) }
                ca_file: \(server.certificate.cert)
            """.write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        return (Runner(environment: [passwordVariable: server.password, "XDG_CONFIG_HOME": config]), folder)
    }

    @Test func aFileAndATreeGoUpAndComeBackOverFTPS() throws {
        let server = try PyFTPServer()
        let (runner, config) = try Self.runner(server)
        defer { withExtendedLifetime(config) {} }
        let file = runner.path("a.bin")
        try Tools.randomFile(file, bytes: 2 << 20)
        let tree = runner.path("tree")
        try Trees.make(tree, big: 1 << 20)

        let up = try runner.orchestrate(["copy", file, "drop:in/"])
        #expect(up.status == 0, "\(up.stdout)\n\(up.stderr)")
        #expect(try Tools.sha256(server.root + "/in/a.bin") == Tools.sha256(file))
        let upTree = try runner.orchestrate(["copy", "-r", tree, "drop:in/tree"])
        #expect(upTree.status == 0, "\(upTree.stdout)\n\(upTree.stderr)")
        #expect(Trees.files(server.root + "/in/tree") == Trees.files(tree))

        let down = try runner.orchestrate(["copy", "drop:in/a.bin", runner.path("back.bin")])
        #expect(down.status == 0, "\(down.stdout)\n\(down.stderr)")
        #expect(try Tools.sha256(runner.path("back.bin")) == Tools.sha256(file))
        let downTree = try runner.orchestrate(["copy", "-r", "drop:in/tree", runner.path("back-tree")])
        #expect(downTree.status == 0, "\(downTree.stdout)\n\(downTree.stderr)")
        #expect(Trees.files(runner.path("back-tree")) == Trees.files(tree))

        for result in [up, upTree, down, downTree] {
            #expect(!result.stdout.contains(server.password) && !result.stderr.contains(server.password))
        }
        let stored = FileManager.default.enumerator(atPath: runner.state)?.compactMap { $0 as? String } ?? []
        for name in stored {
            #expect(FileManager.default.contents(atPath: runner.state + "/" + name)?.range(of: Data(server.password.utf8)) == nil,
                    "the password is in \(name)")
        }
        let tested = try runner.orchestrate(["remote", "test", "drop"])
        #expect(tested.status == 0 && tested.stdout.contains("drop: ok"), "\(tested.stdout)\n\(tested.stderr)")
        let noIfExists = try runner.orchestrate(["copy", "--if-exists", "skip", file, "drop:in/a.bin"])
        #expect(noIfExists.status == 2 && noIfExists.stderr.contains("ftp.upload has no if_exists input"), "\(noIfExists.stderr)")
    }

    /// A remote file whose name starts with a combining mark lands under its own name in the
    /// folder given: split by characters, "in/" and the mark were one, and the whole remote
    /// path was taken for the name.
    @Test func aRemoteNameThatStartsWithACombiningMarkLandsUnderItsOwnName() throws {
        let server = try PyFTPServer()
        let (runner, config) = try Self.runner(server)
        defer { withExtendedLifetime(config) {} }
        let name = "\u{301}take.bin"
        try FileManager.default.createDirectory(atPath: server.root + "/in", withIntermediateDirectories: true)
        try Tools.randomFile(server.root + "/in/" + name, bytes: 50_000)
        let into = runner.path("into")
        try FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: true)

        let down = try runner.orchestrate(["copy", "drop:in/" + name, into])
        #expect(down.status == 0, "\(down.stdout)\n\(down.stderr)")
        let landed = try FileManager.default.contentsOfDirectory(atPath: into)
        #expect(landed.map { Array($0.utf8) } == [Array(name.utf8)], "\(landed)")
        #expect(try Tools.sha256(into + "/" + name) == Tools.sha256(server.root + "/in/" + name))
    }

    /// Without --recursive a remote folder is refused, as a local one is, not fetched whole.
    @Test func aRemoteFolderWithoutRecursiveIsRefused() throws {
        let server = try PyFTPServer()
        let (runner, config) = try Self.runner(server)
        defer { withExtendedLifetime(config) {} }
        try FileManager.default.createDirectory(atPath: server.root + "/in/sub", withIntermediateDirectories: true)
        try Tools.randomFile(server.root + "/in/sub/a.bin", bytes: 1000)
        let into = runner.path("into")
        let down = try runner.orchestrate(["copy", "drop:in", into])
        #expect(down.status != 0, "\(down.stdout)\n\(down.stderr)")
        #expect((down.stdout + down.stderr).contains("recursive is false"), "\(down.stdout)\n\(down.stderr)")
        #expect(!FileManager.default.fileExists(atPath: into + "/sub/a.bin"))
        let recursive = try runner.orchestrate(["copy", "-r", "drop:in", into])
        #expect(recursive.status == 0, "\(recursive.stdout)\n\(recursive.stderr)")
        #expect(try Tools.sha256(into + "/sub/a.bin") == Tools.sha256(server.root + "/in/sub/a.bin"))
    }
}
