#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateLock
import COrchestratePlugin

/// Opens plugin libraries and checks them, in this order, stopping at the first problem:
///
/// 1. the file exists and is a regular file;
/// 2. nobody but root and the current user could have replaced it (see `LibraryFile.checkPermissions`);
/// 3. it starts with an ELF (Mach-O on macOS) header;
/// 4. `dlopen(RTLD_NOW | RTLD_LOCAL)` succeeds (else: wrong architecture, truncated, missing
///    dependency, with the linker's text);
/// 5. it exports `orchestrate_plugin_entry_v1`, which returns a description;
/// 6. the description's ABI version and contents are sane (`DescriptorReader`).
///
/// Libraries are never closed: Swift runtimes and thread-local destructors inside a plugin make
/// unloading unsafe, and a step type handed to the engine must stay callable forever.
///
/// ```swift
/// let plugin = try PluginLoader.load(path: "/usr/lib/orchestrate/plugins/libfoo.so")
/// plugin.stepTypes.map(\.id)   // ["foo.bar"]
/// ```
public enum PluginLoader {
    /// The plugin ABI version this host speaks: it loads plugins of the same major and a minor
    /// no newer than this one.
    public static let abiMajor = UInt32(ORC_ABI_VERSION_MAJOR)
    public static let abiMinor = UInt32(ORC_ABI_VERSION_MINOR)

    private static let lock = Lock()
    nonisolated(unsafe) private static var cache: [String: LoadedPlugin] = [:]

    /// Loads (or returns the already loaded) plugin at `path`. Thread-safe; the same file, by
    /// resolved path, always gives the same `LoadedPlugin`. Refusals are not cached, so a fixed
    /// file can be loaded on a later try.
    public static func load(path: String) throws(PluginRefusal) -> LoadedPlugin {
        do throws(LoadProblem) {
            let resolved = try LibraryFile.resolve(path)
            let result: Result<LoadedPlugin, LoadProblem> = lock.withLock {
                if let cached = cache[resolved] { return .success(cached) }
                let loaded = Result { () throws(LoadProblem) in try open(resolved) }
                if case .success(let plugin) = loaded { cache[resolved] = plugin }
                return loaded
            }
            return try result.get()
        } catch {
            throw PluginRefusal(path: path, reason: error.reason)
        }
    }

    /// Checks 2–6 on a resolved path. Runs under `lock`, which also serialises `dlerror`.
    private static func open(_ resolved: String) throws(LoadProblem) -> LoadedPlugin {
        if let reason = LibraryFile.checkPermissions(resolvedPath: resolved) { throw LoadProblem(reason) }
        if let reason = LibraryFile.checkMagic(resolvedPath: resolved) { throw LoadProblem(reason) }
        _ = dlerror()
        guard let handle = dlopen(resolved, RTLD_NOW | RTLD_LOCAL) else {
            let text = dlerror().map { String(cString: $0) } ?? "unknown dlopen error"
            throw LoadProblem(LibraryFile.explainOpenFailure(resolvedPath: resolved, dlerrorText: text))
        }
        guard let symbol = dlsym(handle, ORC_PLUGIN_ENTRY_SYMBOL) else {
            throw LoadProblem("does not export \(ORC_PLUGIN_ENTRY_SYMBOL) — is it an orchestrate plugin?")
        }
        let entry = unsafeBitCast(symbol, to: orc_plugin_entry_fn.self)
        guard let description = entry() else {
            throw LoadProblem("\(ORC_PLUGIN_ENTRY_SYMBOL) returned NULL (the plugin declined to load)")
        }
        return try DescriptorReader.read(description, path: resolved)
    }
}
