import ArgumentParser
import OrchestrateEngine
import OrchestrateModel

struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check workflow files without running anything.",
        discussion: """
            Reports every error of every file at once, as FILE:LINE:COL: error: MESSAGE, and exits 2 \
            if there is any: YAML syntax, unknown fields, types, unknown step types, `with:` against \
            each step type's input schema, cycles, expressions and what they reference.

            Examples:
              orchestrate validate workflows/*.yaml
              orchestrate validate flow.yaml --plugin-path ./myplugin.so  # your step types
            """)

    @Argument(help: "Workflow files.")
    var files: [String]

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let registry = global.loadPlugins()
        var failed = false
        for file in files {
            do {
                let workflow = try WorkflowLoader.load(path: file, catalog: RegistryStepCatalog(registry: registry),
                                                       remotes: RemotesFile())
                if !global.json { Terminal.line("\(file): ok (\(counted(workflow.steps.count, "step")))") }
            } catch {
                failed = true
                WorkflowLoading.report(error, registry: registry)
            }
        }
        if failed { throw CLIFailure(status: ExitStatus.usage, message: "") }
    }
}
