import Foundation
import OrchestrateEngine
import OrchestrateOperations
import OrchestratePluginHost
import OrchestrateStore

/// `serve --watch FILE…`: loads each workflow, checks its `on.watch`, and runs one
/// `FolderWatcher` per workflow beside the queue worker. The runs and items a watch makes go
/// into the store's queue like any other, so this serve (or another one) executes them.
enum ServeWatches {
    static func start(files: [String], pollOnly: Bool, queue: String, registry: PluginRegistry, store: any StateStore,
                      observer: any RunObserver) throws -> [FolderWatcher]
    {
        var watchers: [FolderWatcher] = []
        var seen: [String: String] = [:]
        for file in files {
            let workflow = try WorkflowLoading.load(path: file, registry: registry)
            let watched: WatchedFolder
            do { watched = try WatchedFolder(workflow: workflow) } catch {
                throw CLIFailure.usage(error.description
                    + (workflow.triggers.watch == nil ? " (serve --watch takes workflows with an 'on: watch:' block)" : ""))
            }
            if let other = seen[watched.identity] {
                throw CLIFailure.usage("\(file) and \(other) both watch \(watched.folder) as workflow '\(workflow.name)': "
                                       + "give each workflow its own name")
            }
            seen[watched.identity] = file
            var options = FolderWatcher.Options()
            options.queue = queue
            options.pollOnly = pollOnly
            options.warn = { Terminal.warning($0) }
            let watcher = try FolderWatcher(watched: watched, store: store, options: options, observer: observer)
            watchers.append(watcher)
        }
        for watcher in watchers {
            watcher.start()
            Terminal.line("watching \(watcher.watched.folder) for \(watcher.watched.workflow.name)", to: .standardError)
        }
        return watchers
    }
}
