// The built-in `http` plugin: HTTP steps on libcurl, built with OrchestratePluginKit exactly as a
// third-party Swift plugin would be (this file is the whole of the plugin-level glue).
import OrchestratePluginKit

enum HTTPPlugin: PluginDefinition {
    static let name = "http"
    static let version = "1.0.0"
    static let summary = "HTTP on libcurl: requests, resumable downloads, resumable uploads (tus, Vimeo streaming, PUT/POST)."
    static let steps: [any StepDefinition.Type] = [RequestStep.self, DownloadStep.self, UploadStep.self]
}

@_cdecl("orchestrate_plugin_entry_v1")
public func orchestratePluginEntry() -> UnsafeRawPointer { HTTPPlugin.entry() }
