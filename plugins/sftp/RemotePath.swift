import OrchestrateExactPath
import OrchestratePluginKit

/// Confinement of remote paths to `remote_root`: the destination is normalised lexically and
/// refused if any `..` would climb above the root. The server is never trusted to confine.
/// Paths are taken apart at their "/" bytes (PathBytes), as the server does, never by Swift's
/// characters (a "/" a combining mark follows is one character that is not "/").
struct RemoteRoot {
    /// Absolute, normalised, no trailing slash ("" for "/").
    let root: String

    /// `root` as configured; a relative root is taken from the server's login directory `home`.
    init(_ configured: String, home: String) throws(StepError) {
        let absolute = PathBytes.isAbsolute(configured) ? configured : home + "/" + configured
        guard let normal = RemoteRoot.normalise(PathBytes.components(absolute, omittingEmpty: true)) else {
            throw .invalidInput("remote_root \(configured) climbs above /", code: "path_escape")
        }
        root = normal.isEmpty ? "" : "/" + normal.joined(separator: "/")
    }

    /// The root as the server names it ("/" for the file system's root).
    var path: String { root.isEmpty ? "/" : root }

    /// The absolute remote path of `relative` (a leading `/` means the root itself), or an
    /// invalid-input error if it escapes the root.
    func resolve(_ relative: String) throws(StepError) -> String {
        let normal = try self.relative(relative)
        return root + (normal.isEmpty ? "" : "/" + normal)
    }

    /// `relative` normalised ("" for the root itself: `.`, `/`), or an invalid-input error if it
    /// escapes the root.
    func relative(_ relative: String) throws(StepError) -> String {
        let parts = PathBytes.components(relative, omittingEmpty: true)
        guard let normal = RemoteRoot.normalise(parts) else {
            throw .invalidInput("remote path \(relative) escapes remote_root \(path)", code: "path_escape")
        }
        return normal.joined(separator: "/")
    }

    private static func normalise(_ parts: [String]) -> [String]? {
        var out: [String] = []
        for part in parts {
            if part.utf8.elementsEqual(".".utf8) { continue }
            if part.utf8.elementsEqual("..".utf8) {
                if out.isEmpty { return nil }
                out.removeLast()
            } else {
                out.append(part)
            }
        }
        return out
    }
}
