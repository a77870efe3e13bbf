import Foundation
import OrchestrateExactPath

/// `serve --api-workflows DIR`: the only workflows the API may start, by name. A write token can
/// otherwise submit any workflow (an `exec` step is a shell as the user `serve` runs as); with a
/// directory, what it can run is what the operator put there, with the inputs it chooses.
///
/// A name is a file of DIR: `NAME.yaml`, `NAME.yml`, or `NAME` itself when it ends so. It cannot
/// leave DIR: no `/`, no leading `.` (so no `..`), and the file's real path (symlinks resolved)
/// must be inside DIR's real path.
struct APIWorkflows: Sendable {
    let directory: String

    /// The real path of the workflow `name`, or a problem that says why there is none.
    func resolve(_ name: String) throws -> String {
        guard !name.isEmpty, name.utf8.count <= 255, name.utf8.first != UInt8(ascii: "."), !PathBytes.contains(name, PathBytes.slash),
              !PathBytes.contains(name, 0)
        else {
            throw Problem(.badRequest, "workflow '\(name)' is not a workflow name: a file name of the server's workflow directory, "
                          + "without '/' and not starting with '.'")
        }
        guard let root = Self.realPath(directory) else {
            throw Problem(.internalServerError, "the server's workflow directory cannot be read")
        }
        let candidates = name.hasSuffix(".yaml") || name.hasSuffix(".yml") ? [name] : [name + ".yaml", name + ".yml"]
        for candidate in candidates {
            let path = (directory as NSString).appendingPathComponent(candidate)
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            guard let real = Self.realPath(path), ExactPath(real).hasPrefix(ExactPath(root == "/" ? "/" : root + "/")) else {
                throw Problem(.forbidden, "workflow '\(name)' leads outside the server's workflow directory (a symbolic link); refused")
            }
            guard stat(real, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                throw Problem(.unprocessableContent, "workflow '\(name)' is not a regular file")
            }
            return real
        }
        throw Problem(.unprocessableContent, "no workflow '\(name)' in the server's workflow directory "
                      + "(\(candidates.joined(separator: " or ")))")
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
