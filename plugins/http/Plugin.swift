// Placeholder: the http plugin's steps land here (issue: HTTP steps on libcurl).
import OrchestratePluginKit

enum HTTPPlugin: PluginDefinition {
    static let name = "http"
    static let version = "0.0.0"
    static let summary = "(not yet implemented)"
    static let steps: [any StepDefinition.Type] = []
}

@_cdecl("orchestrate_plugin_entry_v1")
public func orchestratePluginEntry() -> UnsafeRawPointer { HTTPPlugin.entry() }
