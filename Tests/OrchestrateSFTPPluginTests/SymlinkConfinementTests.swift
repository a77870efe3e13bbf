import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `remote_root` holds against a server-side tree someone else shaped: symlinks planted in and
/// around the root (to folders and files outside it) lead nothing to be written or read outside
/// the root, on both transports, against a real sshd. Symlinks that stay inside the root work.
@Suite(.serialized) struct SymlinkConfinementTests {
    let peer: SSHDPeer
    let h = Harness()
    let known: String
    /// A folder beside the root, that no step may touch.
    let outside: String

    init() throws {
        peer = try SSHDPeer()
        known = try peer.knownHosts()
        outside = peer.dir.file("outside").path
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
    }

    var root: String { peer.remoteRoot }

    /// Runs one `uses` step with `fields` (lines at the `with:` indentation) and the connection.
    func run(_ uses: String, _ fields: String, transport: SSHTransportKind, remoteRoot: String? = nil) throws -> ProcessResult {
        let wf = h.workflow("""
            version: 1
            name: confine
            steps:
              move:
                uses: \(uses)
                with:
                  \(fields)
                  remote_root: \(remoteRoot ?? root)
                  \(peer.connection(knownHosts: known, transport: transport))
            """, name: "confine-\(UUID().uuidString.prefix(6)).yaml")
        return try h.orchestrate(["run", wf, "--json"])
    }

    func link(_ name: String, to target: String) throws {
        let path = "\(root)/\(name)"
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
    }

    /// Everything below `outside`, relative.
    func outsideContents() -> [String] {
        (FileManager.default.subpaths(atPath: outside) ?? []).sorted()
    }

    func isSymlink(_ path: String) -> Bool {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType == .typeSymbolicLink
    }

    @Test(arguments: SSHTransportKind.allCases)
    func anUploadBelowASymlinkedFolderIsRefusedAndNothingIsMadeOutside(transport: SSHTransportKind) throws {
        let file = Harness.randomFile(h.path("small.bin"), size: 1000)
        try link("link", to: outside)
        // Below the link, folders that do not exist yet: once made through the link with mkdir -p.
        let deep = try run("sftp.upload", "source: \(file)\n      destination: link/new/deeper/file.bin", transport: transport)
        #expect(deep.status != 0, "\(deep.stdout)")
        #expect(deep.stdout.contains("\(root)/link is a symbolic link to \(outside)"), "\(deep.stdout)")
        #expect(deep.stdout.contains("outside remote_root"), "\(deep.stdout)")
        // Straight into the linked folder.
        let direct = try run("sftp.upload", "source: \(file)\n      destination: link/file.bin", transport: transport)
        #expect(direct.status != 0, "\(direct.stdout)")
        // A tree whose remote side holds a symlinked subfolder, with a folder to make beneath it.
        let tree = h.path("tree")
        Harness.randomFile("\(tree)/top.bin", size: 10)
        Harness.randomFile("\(tree)/sub/new/f.bin", size: 100, seed: 2)
        try link("tree/sub", to: outside)
        let up = try run("sftp.upload", "source: \(tree)\n      destination: tree", transport: transport)
        #expect(up.status != 0, "\(up.stdout)")
        #expect(up.stdout.contains("\(root)/tree/sub is a symbolic link"), "\(up.stdout)")
        #expect(outsideContents() == [], "written outside the root: \(outsideContents())")

        // A symlink that stays inside the root is followed: the file lands in its target.
        try FileManager.default.createDirectory(atPath: "\(root)/real", withIntermediateDirectories: true)
        try link("inner", to: "\(root)/real")
        let inside = try run("sftp.upload", "source: \(file)\n      destination: inner/new/file.bin", transport: transport)
        #expect(inside.status == 0, "\(inside.stdout)")
        #expect(Harness.sameBytes(file, "\(root)/real/new/file.bin"))
    }

    /// A root whose name has an accent, and beside it a folder whose name differs only in Unicode
    /// normalization (two folders to the filesystem, equal Swift Strings): a symlink to that
    /// folder leads outside the root and is refused.
    @Test(arguments: SSHTransportKind.allCases)
    func aFolderBesideTheRootNamedAlikeIsOutsideIt(transport: SSHTransportKind) throws {
        let file = Harness.randomFile(h.path("small.bin"), size: 1000)
        let accented = peer.dir.file("caf\u{E9}").path, lookalike = peer.dir.file("cafe\u{301}").path
        #expect(accented == lookalike && Array(accented.utf8) != Array(lookalike.utf8))
        for folder in [accented, lookalike] { #expect(mkdir(folder, 0o755) == 0 || errno == EEXIST) }
        #expect(symlink(lookalike, accented + "/link") == 0)
        let up = try run("sftp.upload", "source: \(file)\n      destination: link/file.bin", transport: transport, remoteRoot: accented)
        #expect(up.status != 0, "\(up.stdout)")
        #expect(up.stdout.contains("outside remote_root"), "\(up.stdout)")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: lookalike)) == [], "written beside the root")
    }

    /// A "/" that a combining mark follows is one Swift character but a "/" to the server: a
    /// file whose name starts with one, below a symlinked folder, still has that folder checked;
    /// a path with ".." before such a "/" is still seen to climb.
    @Test(arguments: SSHTransportKind.allCases)
    func aNameStartingWithACombiningMarkStillHasItsFolderChecked(transport: SSHTransportKind) throws {
        let tree = h.path("marks")
        // Made with POSIX calls: Foundation's own path handling splits such a name by characters.
        try FileManager.default.createDirectory(atPath: tree + "/sub", withIntermediateDirectories: true)
        let fd = open(tree + "/sub/\u{301}f.bin", O_WRONLY | O_CREAT | O_EXCL, 0o644)
        #expect(fd >= 0 && write(fd, "marked", 6) == 6)
        close(fd)
        try link("marks/sub", to: outside)
        let up = try run("sftp.upload", "source: \(tree)\n      destination: marks", transport: transport)
        #expect(up.status != 0, "\(up.stdout)")
        #expect(up.stdout.contains("\(root)/marks/sub is a symbolic link"), "\(up.stdout)")
        #expect(outsideContents() == [], "written outside the root: \(outsideContents())")
        let file = Harness.randomFile(h.path("one.bin"), size: 100)
        let climb = try run("sftp.upload", "source: \(file)\n      destination: \"../\\u0301/x.bin\"", transport: transport)
        #expect(climb.status != 0, "\(climb.stdout)")
        #expect(climb.stdout.contains("path_escape"), "\(climb.stdout)")
        #expect(!FileManager.default.fileExists(atPath: (root as NSString).deletingLastPathComponent + "/\u{301}"))
    }

    /// A local name that is not UTF-8 (Latin-1 "caf\\xE9") cannot be carried as a path: the
    /// tree upload is refused, naming the folder, rather than leaving that file out and succeeding.
    @Test(arguments: SSHTransportKind.allCases)
    func aLocalNameThatIsNotUTF8IsRefusedNotLeftOut(transport: SSHTransportKind) throws {
        let tree = h.path("latin")
        Harness.randomFile("\(tree)/fine.bin", size: 100, seed: 4)
        var path = Array((tree + "/").utf8CString.dropLast()) + [0x63, 0x61, 0x66, CChar(bitPattern: 0xE9), 0]
        let fd = open(&path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        #expect(fd >= 0)
        close(fd)
        let up = try run("sftp.upload", "source: \(tree)\n      destination: latin", transport: transport)
        #expect(up.status != 0, "\(up.stdout)")
        #expect(up.stdout.contains("name_not_utf8") && up.stdout.contains("is not UTF-8"), "\(up.stdout)")
    }

    /// A local tree holding X and X.partial (what an interrupted download leaves): X.partial is
    /// X's partial name on the server, so it is left out with a warning, and X arrives whole
    /// (two transfers writing one remote name could leave X holding X.partial's bytes).
    @Test(arguments: SSHTransportKind.allCases)
    func aFileNamedAsItsNeighboursPartialIsLeftOut(transport: SSHTransportKind) throws {
        let tree = h.path("pair")
        let whole = Harness.randomFile("\(tree)/clip.mov", size: 300_000, seed: 5)
        Harness.randomFile("\(tree)/clip.mov.partial", size: 200_000, seed: 6)
        let up = try run("sftp.upload", "source: \(tree)\n      destination: pair", transport: transport)
        #expect(up.status == 0, "\(up.stdout)")
        #expect(up.stdout.contains("skipping clip.mov.partial: its name is the partial file"), "\(up.stdout)")
        #expect(Harness.sameBytes(whole, "\(root)/pair/clip.mov"))
        #expect(!FileManager.default.fileExists(atPath: "\(root)/pair/clip.mov.partial"))
    }

    /// A remote name that is not UTF-8 (Latin-1, put there by another user) is skipped with a
    /// warning: repaired to U+FFFD it named no file, and failed the whole tree download.
    @Test(arguments: SSHTransportKind.allCases)
    func aRemoteNameThatIsNotUTF8IsSkippedWithAWarning(transport: SSHTransportKind) throws {
        let fine = Harness.randomFile("\(root)/latin-down/fine.bin", size: 1000, seed: 8)
        var path = Array("\(root)/latin-down/".utf8CString.dropLast()) + [0x63, 0x61, 0x66, CChar(bitPattern: 0xE9), 0]
        let fd = open(&path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        #expect(fd >= 0)
        close(fd)
        let back = h.path("latin-back")
        let down = try run("sftp.download", "source: latin-down\n      destination: \(back)", transport: transport)
        #expect(down.status == 0, "\(down.stdout)")
        #expect(down.stdout.contains("skipping the entry \\\"caf\\\\xE9\\\" listed in"), "\(down.stdout)")
        #expect(Harness.sameBytes(fine, back + "/fine.bin"))
    }

    @Test(arguments: SSHTransportKind.allCases)
    func aPlantedPartialSymlinkIsRemovedNeverFollowed(transport: SSHTransportKind) throws {
        let file = Harness.randomFile(h.path("small.bin"), size: 100_000)
        let victim = Harness.randomFile("\(outside)/victim.bin", size: 1000, seed: 7)
        let before = try Data(contentsOf: URL(fileURLWithPath: victim))
        // Smaller than the source: a stat that follows it sees a partial to resume from.
        try link("file.bin.partial", to: victim)
        let up = try run("sftp.upload", "source: \(file)\n      destination: file.bin", transport: transport)
        #expect(up.status == 0, "\(up.stdout)")
        #expect(up.stdout.contains("\(root)/file.bin.partial was a symbolic link"), "\(up.stdout)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: victim)) == before, "the file outside the root was written")
        #expect(!isSymlink("\(root)/file.bin"), "a symlink was renamed into place")
        #expect(Harness.sameBytes(file, "\(root)/file.bin"))
        #expect(!FileManager.default.fileExists(atPath: "\(root)/file.bin.partial"))
        #expect(outsideContents() == ["victim.bin"])
    }

    @Test(arguments: SSHTransportKind.allCases)
    func aDownloadOfASymlinkLeadingOutsideIsRefused(transport: SSHTransportKind) throws {
        Harness.randomFile("\(outside)/secret.bin", size: 5000, seed: 3)
        Harness.randomFile("\(outside)/dir/secret.bin", size: 5000, seed: 4)
        try link("leak.bin", to: "\(outside)/secret.bin")
        let leaf = try run("sftp.download", "source: leak.bin\n      destination: \(h.path("got/leak.bin"))", transport: transport)
        #expect(leaf.status != 0, "\(leaf.stdout)")
        #expect(leaf.stdout.contains("\(root)/leak.bin is a symbolic link to \(outside)/secret.bin"), "\(leaf.stdout)")
        #expect(!FileManager.default.fileExists(atPath: h.path("got/leak.bin")))
        #expect(!FileManager.default.fileExists(atPath: h.path("got/leak.bin.partial")))

        // A symlinked folder as the tree to download.
        try link("leakdir", to: "\(outside)/dir")
        let dir = try run("sftp.download", "source: leakdir\n      destination: \(h.path("got/leakdir"))", transport: transport)
        #expect(dir.status != 0, "\(dir.stdout)")
        #expect(dir.stdout.contains("\(root)/leakdir is a symbolic link"), "\(dir.stdout)")
        #expect(!FileManager.default.fileExists(atPath: h.path("got/leakdir")))

        // A tree holding a symlinked folder and a symlinked file: both skipped, the rest comes.
        Harness.randomFile("\(root)/tree/a.bin", size: 2000, seed: 5)
        try link("tree/inner", to: "\(outside)/dir")
        try link("tree/s.bin", to: "\(outside)/secret.bin")
        let tree = try run("sftp.download", "source: tree\n      destination: \(h.path("got/tree"))", transport: transport)
        #expect(tree.status == 0, "\(tree.stdout)")
        #expect(tree.stdout.contains("skipping \(root)/tree/inner"), "\(tree.stdout)")
        #expect((FileManager.default.subpaths(atPath: h.path("got/tree")) ?? []).sorted() == ["a.bin"])

        // A symlink inside the root, to a file inside it, is read.
        try link("alias.bin", to: "\(root)/tree/a.bin")
        let alias = try run("sftp.download", "source: alias.bin\n      destination: \(h.path("got/alias.bin"))", transport: transport)
        #expect(alias.status == 0, "\(alias.stdout)")
        #expect(Harness.sameBytes("\(root)/tree/a.bin", h.path("got/alias.bin")))
    }

    @Test(arguments: SSHTransportKind.allCases)
    func aMissingRemoteRootIsRefusedUnlessCreateRootIsSet(transport: SSHTransportKind) throws {
        let file = Harness.randomFile(h.path("small.bin"), size: 1000)
        let missing = "\(root)/not/there"
        let refused = try run("sftp.upload", "source: \(file)\n      destination: file.bin", transport: transport, remoteRoot: missing)
        #expect(refused.status != 0, "\(refused.stdout)")
        #expect(refused.stdout.contains("remote_root \(missing) does not exist on the server"), "\(refused.stdout)")
        #expect(refused.stdout.contains("create_root: true"), "\(refused.stdout)")
        #expect(!FileManager.default.fileExists(atPath: "\(root)/not"))
        let created = try run("sftp.upload", "source: \(file)\n      destination: file.bin\n      create_root: true",
                              transport: transport, remoteRoot: missing)
        #expect(created.status == 0, "\(created.stdout)")
        #expect(Harness.sameBytes(file, "\(missing)/file.bin"))
    }
}
