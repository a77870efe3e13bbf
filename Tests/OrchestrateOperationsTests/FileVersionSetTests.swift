import OrchestrateStore
import Testing

@testable import OrchestrateOperations

/// The versions a watcher holds (`FileVersionSet`: those handed over and still in the folder, up
/// to one per file it ever received with `after: keep`): which it takes as one, and what a
/// version costs whatever its path.
@Suite struct FileVersionSetTests {
    func file(_ path: String, _ size: Int64 = 4096, _ mtime: Int64 = 1_700_000_000_123_456_789) -> WatchedFile {
        WatchedFile(watch: "node:wf:/in", path: path, size: size, mtimeNanoseconds: mtime)
    }

    @Test func aVersionIsItsPathSizeAndMtime() {
        var set = FileVersionSet([file("shot01/frame_0000001.dpx")])
        #expect(set.contains(file("shot01/frame_0000001.dpx")))
        #expect(!set.contains(file("shot01/frame_0000002.dpx")))
        #expect(!set.contains(file("shot01/frame_0000001.dpx", 4097)))
        #expect(!set.contains(file("shot01/frame_0000001.dpx", 4096, 1_700_000_000_123_456_790)), "a nanosecond apart")
        let again = set.insert(file("shot01/frame_0000001.dpx"))
        let newer = set.insert(file("shot01/frame_0000001.dpx", 8192))
        #expect(!again && newer && set.count == 2)
        set.remove(file("shot01/frame_0000001.dpx"))
        #expect(!set.contains(file("shot01/frame_0000001.dpx")) && set.contains(file("shot01/frame_0000001.dpx", 8192)))
    }

    /// 100,000 versions of 200-byte paths: about 64 bytes each (a 24-byte slot, the table at
    /// least three-eighths full), nothing per path. A `Set<WatchedFile>` took a 48-byte slot and
    /// the path's own string: over 300 bytes a version here, 174 for frames of 24-byte paths.
    @Test func aVersionCostsTheSameWhateverItsPath() {
        #expect(FileVersionSet.bytesPerSlot == 24)
        let prefix = String(repeating: "a-long-folder-name/", count: 10)
        var set = FileVersionSet()
        for i in 0..<100_000 { set.insert(file(prefix + "frame_\(i).dpx")) }
        #expect(set.count == 100_000)
        #expect(set.tableBytes / set.count <= 65, "\(set.tableBytes / set.count) bytes a version")
        #expect(set.contains(file(prefix + "frame_99999.dpx")) && !set.contains(file(prefix + "frame_100000.dpx")))
    }
}
