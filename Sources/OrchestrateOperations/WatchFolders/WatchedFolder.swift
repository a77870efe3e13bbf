import Foundation
import OrchestrateEngine
import OrchestrateExactPath
import OrchestrateModel
import OrchestrateStore

/// A workflow's `on.watch`, resolved on this node: absolute folders and the watch's identity.
///
/// The identity (node, workflow name, folder) keys the hand-off journal: every `serve` on this
/// node watching that folder for that workflow shares it, so a file is handed over once however
/// many of them run. Folders are a node's own (as run directories are), hence the node in it.
public struct WatchedFolder: Sendable {
    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
    }

    public let workflow: Workflow
    public let trigger: WatchTrigger
    /// Absolute, standardized.
    public let folder: String
    /// `after: move-to`, absolute.
    public let moveTo: String?
    public let identity: String
    /// A short stable id of `identity`, for run ids and labels.
    public let shortID: String

    public init(workflow: Workflow, node: String = NodeName.current) throws(Refusal) {
        guard let trigger = workflow.triggers.watch else {
            throw Refusal(description: "\(workflow.file): the workflow has no on.watch")
        }
        let base = (URL(fileURLWithPath: workflow.file).deletingLastPathComponent().path as NSString)
        func absolute(_ path: String) -> String {
            let expanded = (path as NSString).expandingTildeInPath
            return ((expanded.hasPrefix("/") ? expanded : base.appendingPathComponent(expanded)) as NSString).standardizingPath
        }
        folder = absolute(trigger.path)
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw Refusal(description: "\(trigger.location): on.watch path \(folder) is not a folder (create it, or change 'path')")
        }
        if case .moveTo(let target) = trigger.after {
            // Relative: joined to the watched folder by its words alone. `standardizingPath`
            // resolves symbolic links, and a `done` planted as a link in a shared outbox would
            // become the folder it points to.
            let expanded = (target as NSString).expandingTildeInPath
            let resolved = Self.lexicallyJoined(expanded.hasPrefix("/") ? "/" : folder, expanded)
            do {
                if ExactPath(resolved).hasPrefix(ExactPath(folder + "/")) {
                    // Inside the watched folder: made as the moves will reach it, never through a link.
                    let root = try FolderDescriptors.open(folder)
                    defer { close(root) }
                    close(try FolderDescriptors.descend(from: root, into: PathBytes.components(ExactPath(resolved).dropping(ExactPath(folder + "/")), omittingEmpty: true),
                                                        creating: true, owned: true, shown: resolved))
                } else {
                    try FileManager.default.createDirectory(atPath: resolved, withIntermediateDirectories: true)
                }
            } catch {
                throw Refusal(description: "\(trigger.location): cannot use the after: move-to folder \(resolved): "
                              + ((error as? FolderDescriptors.Refused)?.description ?? (error as? FolderDescriptors.Failed)?.description
                                  ?? (error as NSError).localizedDescription))
            }
            moveTo = resolved
        } else {
            moveTo = nil
        }
        self.workflow = workflow
        self.trigger = trigger
        identity = "\(node):\(workflow.name):\(folder)"
        shortID = Self.fnv1a(identity)
    }

    /// The filter of files to hand over (the move-to folder, when inside, is never entered).
    var filter: FolderFilter {
        var skipped: Set<ExactPath> = []
        if let moveTo, ExactPath(moveTo).hasPrefix(ExactPath(folder + "/")) { skipped.insert(ExactPath(ExactPath(moveTo).dropping(ExactPath(folder + "/")))) }
        return FolderFilter(root: folder, recursive: trigger.recursive, include: trigger.include, exclude: trigger.exclude,
                            skippedFolders: skipped)
    }

    /// `base/relative` with "." and ".." taken away by the words alone, never by looking at
    /// the file system (by bytes: a "/" a combining mark follows is still a "/").
    static func lexicallyJoined(_ base: String, _ relative: String) -> String {
        var parts: [String] = PathBytes.components(base, omittingEmpty: true)
        for part in PathBytes.components(relative, omittingEmpty: true) {
            if PathBytes.isDotOrDotDot(part) {
                if part.utf8.count == 2 && !parts.isEmpty { parts.removeLast() }
            } else {
                parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    /// 64-bit FNV-1a as 16 hex digits: short, stable across processes (Swift's Hasher is not).
    static func fnv1a(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
