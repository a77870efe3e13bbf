#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CExecSupport
import OrchestratePluginKit

/// Where `orchestrate-exec-guard` is: next to this plugin's own library (found with dladdr), so
/// it is the guard of the same install whichever process (the engine, or a plugin runner for
/// `isolation: process`) loaded the plugin.
enum GuardLocation {
    static let fileName = "orchestrate-exec-guard"

    /// The guard's path, or why it cannot be used (a clear, permanent error: retrying will not
    /// make it appear).
    static func path() throws(StepError) -> String {
        guard let library = libraryPath else {
            throw .permanent("the exec plugin cannot tell where its library is (dladdr failed), so it cannot find \(fileName)",
                             code: "guard_missing")
        }
        let candidate = directory(of: library) + "/" + fileName
        guard access(candidate, X_OK) == 0 else {
            let reason = String(cString: strerror(errno))
            throw .permanent("the exec plugin's process guard \(candidate) is missing or not executable "
                + "(\(reason)): install \(fileName) next to \(library); "
                + "it makes a command die with orchestrate (see plugins/exec/README.md)", code: "guard_missing")
        }
        return candidate
    }

    /// This plugin's library, resolved through symlinks (a symlinked plugin finds the guard of
    /// the install it points into).
    private static let libraryPath: String? = {
        guard let loaded = orc_exec_image_path(#dsohandle) else { return nil }
        guard let resolved = realpath(loaded, nil) else { return String(cString: loaded) }
        defer { free(resolved) }
        return String(cString: resolved)
    }()

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
