// The built-in `ftp` plugin: FTPS (TLS required unless plain FTP is asked for by name) on
// libcurl, built with OrchestratePluginKit like any third-party plugin.
import OrchestratePluginKit

enum FTPPlugin: PluginDefinition {
    static let name = "ftp"
    static let version = "1.0.0"
    static let summary = "FTPS on libcurl: resumable uploads (APPE) and downloads (REST) of files and trees, confined to remote_root."
    static let steps: [any StepDefinition.Type] = [UploadStep.self, DownloadStep.self]
}

@_cdecl("orchestrate_plugin_entry_v1")
public func orchestratePluginEntry() -> UnsafeRawPointer { FTPPlugin.entry() }
