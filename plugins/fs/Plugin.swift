// The built-in `fs` plugin: local file steps, built with OrchestratePluginKit exactly as a
// third-party Swift plugin would be (this file is the whole of the plugin-level glue).
import OrchestratePluginKit

enum FSPlugin: PluginDefinition {
    static let name = "fs"
    static let version = "1.0.0"
    static let summary = "Local files: copy (resumable, verified), move, checksum."
    static let steps: [any StepDefinition.Type] = [Copy.self, Move.self, Checksum.self]
}

@_cdecl("orchestrate_plugin_entry_v1")
public func orchestratePluginEntry() -> UnsafeRawPointer { FSPlugin.entry() }
