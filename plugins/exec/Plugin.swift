// The built-in `exec` plugin: run a command as a step, built with OrchestratePluginKit exactly
// as a third-party Swift plugin would be.
import OrchestratePluginKit

enum ExecPlugin: PluginDefinition {
    static let name = "exec"
    static let version = "1.0.0"
    static let summary = "Run a command: argv, environment, exit codes, streamed output, cancellation."
    static let steps: [any StepDefinition.Type] = [Exec.self]
}

@_cdecl("orchestrate_plugin_entry_v1")
public func orchestratePluginEntry() -> UnsafeRawPointer { ExecPlugin.entry() }
