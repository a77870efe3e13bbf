import OrchestratePluginKit

/// Confinement of remote paths to `remote_root`: the destination is normalised lexically and
/// refused if any `..` would climb above the root. The server is never trusted to confine.
struct RemoteRoot {
    /// Absolute, normalised, no trailing slash ("" for "/").
    let root: String

    /// `root` as configured; a relative root is taken from the server's login directory `home`.
    init(_ configured: String, home: String) throws(StepError) {
        let absolute = configured.hasPrefix("/") ? configured : home + "/" + configured
        guard let normal = RemoteRoot.normalise(absolute.split(separator: "/", omittingEmptySubsequences: true).map(String.init)) else {
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
        let parts = relative.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard let normal = RemoteRoot.normalise(parts) else {
            throw .invalidInput("remote path \(relative) escapes remote_root \(path)", code: "path_escape")
        }
        return normal.joined(separator: "/")
    }

    private static func normalise(_ parts: [String]) -> [String]? {
        var out: [String] = []
        for part in parts {
            if part == "." { continue }
            if part == ".." {
                if out.isEmpty { return nil }
                out.removeLast()
            } else {
                out.append(part)
            }
        }
        return out
    }
}
