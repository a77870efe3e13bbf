#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestratePluginKit

/// Finds the executable for `command[0]` the way a shell would, before spawning, so "command
/// not found" is an invalid-input error with a clear message rather than a child that exits
/// with status 127.
enum CommandLookup {
    static let defaultPath = "/usr/local/bin:/usr/bin:/bin"

    /// The path to pass to posix_spawn. A name with a slash is used as is (relative to `cwd`
    /// when given); a bare name is searched in `path` (the child's PATH).
    static func resolve(_ name: String, path: String?, cwd: String?) throws(StepError) -> String {
        guard !name.isEmpty else { throw .invalidInput("command[0] is empty") }
        if name.contains("/") {
            let full = name.hasPrefix("/") || cwd == nil ? name : cwd! + "/" + name
            return try check(full, shown: name)
        }
        for directory in (path ?? defaultPath).split(separator: ":", omittingEmptySubsequences: false) {
            let dir = directory.isEmpty ? "." : String(directory)
            let base = dir.hasPrefix("/") || cwd == nil ? dir : cwd! + "/" + dir
            let candidate = base + "/" + name
            if isExecutableFile(candidate) { return candidate }
        }
        throw .invalidInput("command not found: \(name) (searched PATH=\(path ?? defaultPath)); "
            + "fix command[0], give its full path, or set PATH in env", code: "command_not_found")
    }

    private static func check(_ full: String, shown: String) throws(StepError) -> String {
        var info = stat()
        guard stat(full, &info) == 0 else {
            throw .invalidInput("command not found: \(shown); fix command[0]", code: "command_not_found")
        }
        guard isExecutable(info, full) else {
            throw .invalidInput("command is not an executable file: \(shown); make it executable (chmod +x), "
                + "or name its interpreter in command: [sh, \(shown)]", code: "not_executable")
        }
        return full
    }

    private static func isExecutableFile(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && isExecutable(info, path)
    }

    /// A regular file with an execute bit that we may use (root passes access(X_OK) for any
    /// file with one execute bit, so the mode is checked too).
    private static func isExecutable(_ info: stat, _ path: String) -> Bool {
        (info.st_mode & S_IFMT) == S_IFREG && info.st_mode & 0o111 != 0 && access(path, X_OK) == 0
    }
}
