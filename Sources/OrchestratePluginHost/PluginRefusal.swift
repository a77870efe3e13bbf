/// Why the host would not load a plugin file. Every check has its own reason text, written for
/// the person who installed the plugin: it says what is wrong and, where it can, what to do.
///
/// ```swift
/// do { _ = try PluginLoader.load(path: "/opt/plugins/x.so") }
/// catch { print(error) }   // plugin /opt/plugins/x.so refused: not a shared library (no ELF header)
/// ```
public struct PluginRefusal: Error, Sendable, CustomStringConvertible {
    /// The plugin file as it was named (not resolved), so the message matches what the user typed.
    public let path: String
    /// The reason alone, without the path.
    public let reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "plugin \(path) refused: \(reason)" }
}

/// A refusal reason before the path is attached (what the individual checks throw).
struct LoadProblem: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}
