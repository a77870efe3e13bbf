import Foundation
@testable import OrchestrateOperations
import OrchestrateTestSupport
import Testing

/// `after: move-to` never overwrites a file already in the move-to folder: the moved file takes
/// the first free name of `NAME`, `NAME.1`, `NAME.2`…, chosen by the rename itself
/// (RENAME_NOREPLACE), so a file created there between a look and the rename is kept.
@Suite struct RenameWithoutReplacingTests {
    @Test func aTakenNameIsNeverOverwritten() throws {
        let dir = TemporaryDirectory("noreplace")
        let from = dir.file("from").path, to = dir.file("to").path
        for folder in [from, to] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try Data("earlier".utf8).write(to: URL(fileURLWithPath: to + "/take.mov"))
        try Data("earlier 1".utf8).write(to: URL(fileURLWithPath: to + "/take.mov.1"))
        try Data("moved".utf8).write(to: URL(fileURLWithPath: from + "/take.mov"))
        let source = open(from, O_RDONLY | O_DIRECTORY), target = open(to, O_RDONLY | O_DIRECTORY)
        defer { close(source); close(target) }
        var free = ""
        #expect(WatchHandOver.hasRenameWithoutReplacing, "renameat2 not found: the rename falls back to look-then-rename")
        #expect(WatchHandOver.renameWithoutReplacing(source, "take.mov", target, &free))
        #expect(free == "take.mov.2")
        #expect(try String(contentsOfFile: to + "/take.mov", encoding: .utf8) == "earlier")
        #expect(try String(contentsOfFile: to + "/take.mov.1", encoding: .utf8) == "earlier 1")
        #expect(try String(contentsOfFile: to + "/take.mov.2", encoding: .utf8) == "moved")
        #expect(!FileManager.default.fileExists(atPath: from + "/take.mov"))
        // A missing source fails with errno, and no name is taken.
        #expect(!WatchHandOver.renameWithoutReplacing(source, "gone.mov", target, &free) && errno == ENOENT)
    }
}
