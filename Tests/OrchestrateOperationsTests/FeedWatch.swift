import Foundation
import OrchestrateModel
import OrchestrateTestSupport

@testable import OrchestrateOperations

/// A watch of the new folder `name` in `dir` (200 ms settle) feeding a session step: what the
/// watch tests hand files to.
enum FeedWatch {
    static func make(_ name: String, in dir: TemporaryDirectory, recursive: Bool = false) throws -> (watched: WatchedFolder, folder: String) {
        let file = dir.write("\(name).yaml", """
            name: feed
            on:
              watch: { path: \(name), recursive: \(recursive), settle: 200ms, feed: accept }
            steps:
              accept:
                uses: sftp.accept-paths
                with: { host: h }
            """).path
        let folder = dir.file(name).path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let workflow = try WorkflowLoader.parse(source: String(contentsOfFile: file, encoding: .utf8), file: file, catalog: nil)
        return (try WatchedFolder(workflow: workflow), folder)
    }
}
