import Foundation
import OrchestrateExactPath
@testable import OrchestrateOperations
import OrchestrateTestSupport
import Testing

/// A watch's scan of its folder (`FolderFilter.scan`, read with `readdir` as it goes): what it
/// hands on and what it leaves alone.
@Suite struct FolderScanTests {
    @Test func aScanHandsOnMatchingRegularFilesAndEntersFolders() throws {
        let dir = TemporaryDirectory("scan")
        try FileManager.default.createDirectory(atPath: dir.path + "/shot01", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir.path + "/.partial", withIntermediateDirectories: true)
        _ = dir.write("a.dpx", "a")
        _ = dir.write("shot01/b.dpx", "bb")
        _ = dir.write("shot01/b_proxy.dpx", "p")
        _ = dir.write(".hidden.dpx", "h")
        _ = dir.write(".partial/c.dpx", "c")
        try FileManager.default.createSymbolicLink(atPath: dir.path + "/planted.dpx", withDestinationPath: dir.path + "/a.dpx")
        let filter = FolderFilter(root: dir.path, recursive: true, include: [], exclude: ["*_proxy.*"], skippedFolders: [])
        var files: [String: FileSignature] = [:]
        let folders = filter.scan { files[$0] = $1 }
        #expect(files.keys.sorted() == ["a.dpx", "shot01/b.dpx"], "no link, no hidden name, no excluded file")
        #expect(files["shot01/b.dpx"]?.size == 2)
        #expect(files["a.dpx"] == FileSignature.of(root: dir.path, relative: "a.dpx"))
        #expect(folders.sorted() == ["", "shot01"])
        var flat: [String] = []
        _ = FolderFilter(root: dir.path, recursive: false, include: [], exclude: [], skippedFolders: []).scan { path, _ in flat.append(path) }
        #expect(flat == ["a.dpx"])
    }

    /// A scan of the folders inotify reported new (`below`) reads those and what they hold, and
    /// leaves out what a scan of the whole folder would: hidden folders, the move-to folder and
    /// what is inside it, and everything when the watch is not recursive.
    @Test func aScanOfNewFoldersReadsThoseAloneAndSkipsWhatAWholeScanSkips() throws {
        let dir = TemporaryDirectory("scan")
        for folder in ["old", "new/deeper", ".partial/shot", "done/shot", "other"] {
            try FileManager.default.createDirectory(atPath: dir.path + "/" + folder, withIntermediateDirectories: true)
        }
        for file in ["a.dpx", "old/b.dpx", "new/c.dpx", "new/deeper/d.dpx", ".partial/shot/e.dpx", "done/shot/f.dpx", "other/g.dpx"] {
            _ = dir.write(file, file)
        }
        let filter = FolderFilter(root: dir.path, recursive: true, include: [], exclude: [], skippedFolders: [ExactPath("done")])
        var files: [String] = []
        let entered = filter.scan(below: ["new", ".partial/shot", "done", "done/shot", "other"]) { relative, _ in files.append(relative) }
        #expect(files.sorted() == ["new/c.dpx", "new/deeper/d.dpx", "other/g.dpx"])
        #expect(entered.sorted() == ["new", "new/deeper", "other"])
        var none: [String] = []
        #expect(filter.scan(below: []) { relative, _ in none.append(relative) }.isEmpty)
        let flat = FolderFilter(root: dir.path, recursive: false, include: [], exclude: [], skippedFolders: [])
        #expect(flat.scan(below: ["new"]) { relative, _ in none.append(relative) }.isEmpty)
        #expect(none.isEmpty)
    }

    /// A subfolder swapped for a symbolic link after the scan listed it (here: while the scan
    /// hands on the file beside it, so the swap always lands in the window) is not read through
    /// the link, and a file's signature is not taken through one: a file outside the watched
    /// folder never looks like one inside it.
    @Test func aSubfolderSwappedForALinkIsNotReadNorSigned() throws {
        let dir = TemporaryDirectory("scan")
        try FileManager.default.createDirectory(atPath: dir.path + "/in/shot", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir.path + "/outside", withIntermediateDirectories: true)
        _ = dir.write("in/first.dpx", "1")
        _ = dir.write("in/shot/frame.dpx", "2")
        _ = dir.write("outside/secret.dpx", "secret")
        let root = dir.path + "/in"
        var swapped = false
        var files: [String] = []
        _ = FolderFilter(root: root, recursive: true, include: [], exclude: [], skippedFolders: []).scan { relative, _ in
            files.append(relative)
            if !swapped {
                swapped = true
                #expect(rename(root + "/shot", root + "/.shot") == 0 && symlink(dir.path + "/outside", root + "/shot") == 0)
            }
        }
        #expect(swapped && files == ["first.dpx"], "\(files)")
        #expect(FileSignature.of(root: root, relative: "shot/secret.dpx") == nil)
        #expect(FileSignature.of(root: root, relative: "first.dpx")?.size == 1)
    }

    /// Makes a file whose name is `bytes` (not necessarily UTF-8) in `folder`.
    static func plant(_ folder: String, _ bytes: [UInt8]) throws {
        let path = Array(folder.utf8) + [UInt8(ascii: "/")] + bytes + [0]
        let fd = path.withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o644) } }
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        close(fd)
    }

    /// A Latin-1 name (an old file server's) is not handed on as a repaired string that names no
    /// file: it is reported, its bad byte shown, and the other files go on.
    @Test func aNameThatIsNotUTF8IsReportedNotHandedOn() throws {
        let dir = TemporaryDirectory("scan-latin1")
        try FileManager.default.createDirectory(atPath: dir.path + "/shot", withIntermediateDirectories: true)
        try Self.plant(dir.path + "/shot", Array("caf".utf8) + [0xE9] + Array(".mov".utf8))
        _ = dir.write("shot/caf\u{E9}.mov", "utf-8")
        var files: [String] = []
        var unreadable: [String] = []
        _ = FolderFilter(root: dir.path, recursive: true, include: [], exclude: [], skippedFolders: [])
            .scan(unreadable: { unreadable.append($0) }) { path, _ in files.append(path) }
        #expect(files == ["shot/caf\u{E9}.mov"])
        #expect(unreadable == ["shot/caf\\xE9.mov"])
        #expect(PathBytes.shown([0x61, 0xC3, 0xA9, 0xFF, 0x62]) == "a\u{E9}\\xFFb")
    }
}
