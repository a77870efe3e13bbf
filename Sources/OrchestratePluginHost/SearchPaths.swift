#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension PluginRegistry {
    /// The environment variable with extra plugin directories or files, colon-separated.
    public static let pluginPathVariable = "ORCHESTRATE_PLUGIN_PATH"

    /// The search order from docs/design.md ("Command line"), earliest wins a step-id clash:
    ///
    /// 1. the install's own plugins: `liborchestrate-plugin-*.so` next to the executable (where
    ///    SwiftPM puts the built-in plugins), then every library in
    ///    `<exe dir>/../lib/orchestrate/plugins/` (where a packaged install puts them);
    /// 2. each entry of `$ORCHESTRATE_PLUGIN_PATH` (empty entries are ignored);
    /// 3. each `--plugin-path` value, in order.
    ///
    /// The current directory is never searched unless named explicitly: a plugin runs code in
    /// the orchestrate process, so a file dropped in a work directory must not get that power.
    /// The executable path is resolved (symlinks followed), so a symlink in /usr/local/bin still
    /// finds the plugins beside the real binary.
    public static func standardSearchPaths(executablePath: String, environment: [String: String],
                                           extra: [String]) -> [String]
    {
        var paths: [String] = []
        var executable = executablePath
        if let resolved = realpath(executablePath, nil) {
            executable = String(cString: resolved)
            free(resolved)
        }
        if executable.contains("/") {
            let dir = LibraryFile.parentDirectory(of: executable)
            let builtIns = DirectoryListing.names(in: dir).filter { name in
                name.hasPrefix("liborchestrate-plugin-") && libraryExtensions.contains { name.hasSuffix("." + $0) }
            }
            paths += builtIns.map { dir == "/" ? "/" + $0 : dir + "/" + $0 }
            let packaged = dir + "/../lib/orchestrate/plugins"
            var info = stat()
            if stat(packaged, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
                if let resolved = realpath(packaged, nil) {
                    paths.append(String(cString: resolved))
                    free(resolved)
                }
            }
        }
        if let variable = environment[pluginPathVariable] {
            paths += variable.split(separator: ":", omittingEmptySubsequences: true).map(String.init)
        }
        paths += extra.filter { !$0.isEmpty }
        return paths
    }
}
