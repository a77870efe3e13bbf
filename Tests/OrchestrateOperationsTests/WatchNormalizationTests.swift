import Foundation
import OrchestrateExactPath
import OrchestrateModel
import OrchestrateStore
import OrchestrateTestSupport
import Testing

@testable import OrchestrateOperations

/// Two names that differ only in Unicode normalization ("café" with a precomposed "é", and with
/// "e" and a combining accent: what a Mac writes) are two files on Linux, but equal Swift
/// Strings. A watch hands over both, whether a scan or inotify meets them, even with the same
/// size and mtime (a copy that keeps timestamps).
@Suite(.serialized) struct WatchNormalizationTests {
    let dir = TemporaryDirectory("watch-nfd")

    static let precomposed = "caf\u{E9}.mov", decomposed = "cafe\u{301}.mov"

    @Test(arguments: StoreKind.allCases)
    func namesThatDifferOnlyInNormalizationAreTwoFiles(_ kind: StoreKind) throws {
        #expect(Self.precomposed == Self.decomposed && Array(Self.precomposed.utf8) != Array(Self.decomposed.utf8))
        let (watched, folder) = try FeedWatch.make("in-\(kind)", in: dir)
        // Met by the first scan: the same bytes, the same mtime.
        let when = timespec(tv_sec: 1_700_000_000, tv_nsec: 123_456_789)
        for relative in [Self.precomposed, Self.decomposed] {
            let path = folder + "/" + relative
            try Self.create(path, "same")
            var times = [when, when]
            #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        }
        let store = try kind.open(in: dir)
        var options = FolderWatcher.Options()
        options.scanIntervalWithInotify = 60  // what comes later is seen by inotify alone
        options.environment = [:]
        let watcher = try FolderWatcher(watched: watched, store: store, options: options)
        watcher.start()
        defer { watcher.stop() }
        func handedOver() -> Set<ExactPath> {
            Set(((try? store.watchHandOffs(watch: watched.identity, pendingOnly: false)) ?? []).map { ExactPath($0.file.path) })
        }
        func waitFor(_ count: Int) {
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline && handedOver().count < count { Thread.sleep(forTimeInterval: 0.1) }
        }
        waitFor(2)
        #expect(handedOver() == [ExactPath(Self.precomposed), ExactPath(Self.decomposed)])
        // Met by inotify, written together.
        let later = ["new-" + Self.precomposed, "new-" + Self.decomposed]
        for relative in later { try Self.create(folder + "/" + relative, "later") }
        waitFor(4)
        #expect(handedOver() == Set(([Self.precomposed, Self.decomposed] + later).map(ExactPath.init)))
    }

    /// Creates the file by its bytes (POSIX: no layer that might normalize the name).
    static func create(_ path: String, _ text: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        try #require(fd >= 0, "cannot create \(path)")
        defer { close(fd) }
        let bytes = Array(text.utf8)
        #expect(write(fd, bytes, bytes.count) == bytes.count)
    }
}
