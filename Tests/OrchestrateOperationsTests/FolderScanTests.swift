import Foundation
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
        #expect(files["a.dpx"] == FileSignature.of(dir.path + "/a.dpx"))
        #expect(folders.sorted() == ["", "shot01"])
        var flat: [String] = []
        _ = FolderFilter(root: dir.path, recursive: false, include: [], exclude: [], skippedFolders: []).scan { path, _ in flat.append(path) }
        #expect(flat == ["a.dpx"])
    }
}
