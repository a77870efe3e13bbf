// The built-in `sftp` plugin on libssh2, built with OrchestratePluginKit like any third-party plugin.
import OrchestratePluginKit

enum SFTPPlugin: PluginDefinition {
    static let name = "sftp"
    static let version = "1.0.0"
    static let summary = "SFTP on libssh2: sessions, resumable pipelined uploads/downloads, a persistent path-accepting session."
    static let steps: [any StepDefinition.Type] = [ConnectStep.self, UploadStep.self, DownloadStep.self, AcceptPathsStep.self]
}

@_cdecl("orchestrate_plugin_entry_v1")
public func orchestratePluginEntry() -> UnsafeRawPointer { SFTPPlugin.entry() }
