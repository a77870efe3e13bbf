import OrchestratePluginHost

/// The version of orchestrate, in one place: `orchestrate --version` prints it (with the plugin
/// ABI it speaks, which is what a plugin author needs to know). Bump it here when releasing.
enum OrchestrateVersion {
    static let number = "0.1.0"

    /// What `--version` prints: `0.1.0 (plugin ABI 1.2)`.
    static var description: String { "\(number) (plugin ABI \(PluginLoader.abiMajor).\(PluginLoader.abiMinor))" }
}
