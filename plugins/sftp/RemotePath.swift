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

    /// The absolute remote path of `relative` (a leading `/` means the root itself), or an
    /// invalid-input error if it escapes the root.
    func resolve(_ relative: String) throws(StepError) -> String {
        let parts = relative.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard let normal = RemoteRoot.normalise(parts) else {
            throw .invalidInput("remote path \(relative) escapes remote_root \(root.isEmpty ? "/" : root)", code: "path_escape")
        }
        return root + (normal.isEmpty ? "" : "/" + normal.joined(separator: "/"))
    }

    /// Whether the absolute `path` (e.g. a server's realpath) lies inside the root.
    func contains(_ path: String) -> Bool { root.isEmpty || path == root || path.hasPrefix(root + "/") }

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
