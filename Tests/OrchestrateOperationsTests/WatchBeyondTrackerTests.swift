import Foundation
import OrchestrateModel
import OrchestrateStore
import OrchestrateTestSupport
import Testing

@testable import OrchestrateOperations

/// A watch whose folder holds more files than it tracks at once (`filesWaitingAtOnce`, 16,384
/// by default; 40 here), on both stores: the files left out are taken in by a scan as soon as
/// half of the tracked ones were handed over, not at the next periodic scan (set to a minute
/// here), and every file is handed over exactly once.
@Suite(.serialized) struct WatchBeyondTrackerTests {
    enum Kind: String, CaseIterable, Sendable { case sqlite, postgres }

    let dir = TemporaryDirectory("watch-beyond")

    func open(_ kind: Kind) throws -> any StateStore {
        switch kind {
        case .sqlite: return try StoreOpening.open(.sqlite(directory: dir.file("state").path))
        case .postgres: return try StoreOpening.open(.postgres(connection: try PostgresServer.shared().createDatabase()))
        }
    }

    func write(_ relative: String) throws {
        let path = dir.file("in/" + relative).path
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(relative.utf8).write(to: URL(fileURLWithPath: path))
    }

    @Test(arguments: Kind.allCases)
    func filesBeyondWhatIsTrackedAreTakenInByAScanOnceThereIsRoom(_ kind: Kind) throws {
        let file = dir.write("feed.yaml", """
            name: feed
            on:
              watch: { path: in, recursive: true, settle: 200ms, feed: accept }
            steps:
              accept:
                uses: sftp.accept-paths
                with: { host: h }
            """).path
        try FileManager.default.createDirectory(atPath: dir.file("in").path, withIntermediateDirectories: true)
        let watched = try WatchedFolder(workflow: WorkflowLoader.parse(source: String(contentsOfFile: file, encoding: .utf8),
                                                                       file: file, catalog: nil))
        let store = try open(kind)
        // 300 files there before the watch starts (its first scan meets them), 100 after (inotify).
        let before = (0..<300).map { "shot\($0 / 100)/frame_\($0).dpx" }
        let after = (300..<400).map { "late/frame_\($0).dpx" }
        for relative in before { try write(relative) }

        var options = FolderWatcher.Options()
        options.filesWaitingAtOnce = 40
        options.scanIntervalWithInotify = 60
        options.environment = [:]
        let watcher = try FolderWatcher(watched: watched, store: store, options: options)
        watcher.start()
        defer { watcher.stop() }
        for relative in after { try write(relative) }

        let deadline = Date().addingTimeInterval(30)
        var handedOver: [String] = []
        while Date() < deadline {
            handedOver = try store.watchHandOffs(watch: watched.identity, pendingOnly: false).map(\.file.path)
            if handedOver.count >= before.count + after.count { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        #expect(handedOver.count == Set(handedOver).count, "a file handed over twice")
        #expect(Set(handedOver) == Set(before + after), "\(handedOver.count) of \(before.count + after.count) handed over")
    }
}
