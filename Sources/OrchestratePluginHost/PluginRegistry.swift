#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every plugin found on the search paths, and the step types they provide, indexed by id.
///
/// Built once at start-up. A plugin that fails a check is left out, its refusal kept in
/// `refusals` and passed to `warn`, and everything else still loads: one broken third-party
/// file must not stop workflows that don't use it.
///
/// ```swift
/// let paths = PluginRegistry.standardSearchPaths(executablePath: CommandLine.arguments[0],
///                                                environment: env, extra: options.pluginPaths)
/// let registry = PluginRegistry(searchPaths: paths, warn: { log.warning("\($0)") })
/// guard let copy = registry.stepType("fs.copy") else { ... }
/// ```
///
/// Step ids are global: when two plugins declare the same id, the one found first wins and the
/// later plugin is refused as a whole (the message names both files). The search order is
/// therefore also a precedence order.
public final class PluginRegistry: @unchecked Sendable {
    /// The plugins loaded, in search order.
    public let plugins: [LoadedPlugin]
    /// The files that were refused, in search order.
    public let refusals: [PluginRefusal]
    private let byID: [String: StepType]

    /// Each search path is a directory (every `*.so` in it, sorted by name; `*.dylib` too on
    /// macOS) or a single library file. A path that does not exist is reported to `warn` and
    /// skipped. The same file reached twice (say, through a symlink) is loaded once.
    public init(searchPaths: [String], warn: (String) -> Void = { _ in }) {
        var plugins: [LoadedPlugin] = []
        var refusals: [PluginRefusal] = []
        var byID: [String: StepType] = [:]
        for file in PluginRegistry.candidateFiles(searchPaths, warn: warn) {
            let plugin: LoadedPlugin
            do { plugin = try PluginLoader.load(path: file) } catch {
                refusals.append(error)
                warn(error.description)
                continue
            }
            if plugins.contains(where: { $0 === plugin }) { continue }
            let clashes = plugin.stepTypes.compactMap { step in
                byID[step.id].map { "step type \(step.id) is already provided by plugin \($0.pluginName) (\($0.pluginPath))" }
            }
            if !clashes.isEmpty {
                let refusal = PluginRefusal(path: file, reason: clashes.joined(separator: "; "))
                refusals.append(refusal)
                warn(refusal.description)
                continue
            }
            for step in plugin.stepTypes { byID[step.id] = step }
            plugins.append(plugin)
        }
        self.plugins = plugins
        self.refusals = refusals
        self.byID = byID
    }

    /// The step type with this id (`fs.copy`), if a loaded plugin provides it.
    public func stepType(_ id: String) -> StepType? { byID[id] }

    /// Every step type, sorted by id.
    public var stepTypes: [StepType] { byID.values.sorted { $0.id < $1.id } }

    /// The files the search paths name, in order.
    static func candidateFiles(_ searchPaths: [String], warn: (String) -> Void) -> [String] {
        var files: [String] = []
        for path in searchPaths where !path.isEmpty {
            var info = stat()
            guard stat(path, &info) == 0 else {
                warn("plugin path \(path) does not exist")
                continue
            }
            if (info.st_mode & S_IFMT) == S_IFDIR {
                let names = DirectoryListing.names(in: path).filter { name in
                    !name.hasPrefix(".") && PluginRegistry.libraryExtensions.contains { name.hasSuffix("." + $0) }
                }
                files += names.map { path.hasSuffix("/") ? path + $0 : path + "/" + $0 }
            } else {
                files.append(path)
            }
        }
        return files
    }

    /// File name extensions of plugin libraries on this platform.
    static var libraryExtensions: [String] {
        #if canImport(Darwin)
        return ["dylib", "so"]
        #else
        return ["so"]
        #endif
    }
}

/// Sorted directory listings without Foundation.
enum DirectoryListing {
    /// The entry names of `path` (without "." and ".."), sorted bytewise; empty when unreadable.
    static func names(in path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: entry.pointee.d_name)) {
                    String(cString: $0)
                }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }
}
