// Placeholder: the sftp plugin's steps land here (issue: SFTP steps on libssh2).
import OrchestratePluginKit

enum SFTPPlugin: PluginDefinition {
    static let name = "sftp"
    static let version = "0.0.0"
    static let summary = "(not yet implemented)"
    static let steps: [any StepDefinition.Type] = []
}

@_cdecl("orchestrate_plugin_entry_v1")
public func orchestratePluginEntry() -> UnsafeRawPointer { SFTPPlugin.entry() }
