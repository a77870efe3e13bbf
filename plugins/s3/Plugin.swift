// The built-in `s3` plugin: S3 and S3-compatible object storage on libcurl, with its own
// Signature Version 4 signer (Auth/), built with OrchestratePluginKit like any Swift plugin.
import OrchestratePluginKit

enum S3Plugin: PluginDefinition {
    static let name = "s3"
    static let version = "0.1.0"
    static let summary = "S3 and compatibles: resumable parallel multipart uploads, ranged parallel downloads, deletes; SigV4, verified end to end."
    static let steps: [any StepDefinition.Type] = [UploadStep.self, DownloadStep.self, DeleteStep.self]
}

@_cdecl("orchestrate_plugin_entry_v1")
public func orchestratePluginEntry() -> UnsafeRawPointer { S3Plugin.entry() }
