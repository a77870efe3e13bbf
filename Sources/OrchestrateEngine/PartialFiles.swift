#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateJSON
import OrchestrateStore

/// The local partial file a step's checkpoint names (`"partial": "/abs/dir/.NAME.part"`, the
/// convention of the transfer plugins): what a later attempt or a `resume` continues from.
///
/// A plugin cannot tell a cancelled run from an interrupted one (`is_cancelled` says "stop" for
/// both: the run's `cancel`, Ctrl-C, a shutdown, a timeout), so the engine, which can, decides:
/// - while the step can still resume (the run interrupted, a retry waiting), `status` shows
///   where its partial is;
/// - once nothing can resume it (the step failed for good, the run was cancelled or failed),
///   the engine removes it.
/// Only a regular file (never a symlink, which `lstat` does not follow) whose absolute path
/// ends in `.part` or `.partial` is removed: a tampered checkpoint cannot aim the removal at
/// anything else.
public enum PartialFiles {
    /// The partial named in `checkpoint` (the checkpoint's JSON bytes), if any.
    public static func path(inCheckpoint checkpoint: [UInt8]?) -> String? {
        guard let checkpoint, let json = try? JSONValue(parsing: String(decoding: checkpoint, as: UTF8.self)),
              let path = json["partial"]?.stringValue, isPartialName(path) else { return nil }
        return path
    }

    /// The partial of step `stepID` that still exists, for `status`.
    public static func existing(runID: String, stepID: String, store: any StateStore) -> String? {
        guard let path = path(inCheckpoint: try? store.checkpoint(runID: runID, stepID: stepID)) else { return nil }
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG ? path : nil
    }

    /// Removes the partial of step `stepID` (nothing can resume it any more); returns its path
    /// when it was removed.
    @discardableResult
    public static func remove(runID: String, stepID: String, store: any StateStore) -> String? {
        guard let path = existing(runID: runID, stepID: stepID, store: store) else { return nil }
        return unlink(path) == 0 ? path : nil
    }

    private static func isPartialName(_ path: String) -> Bool {
        path.hasPrefix("/") && !path.hasSuffix("/") && (path.hasSuffix(".part") || path.hasSuffix(".partial"))
    }
}
