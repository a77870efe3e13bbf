import ArgumentParser
import OrchestrateEngine
import OrchestrateModel

/// Hidden: prints machine-made documents of the language, checked in and kept fresh by tests.
struct SchemaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Print a JSON Schema of the workflow language.",
        discussion: """
            `orchestrate schema workflow` prints the JSON Schema editors use for workflow files \
            (schemas/workflow.schema.json is this, made with the built-in plugins only): the fields \
            of the language, and each step type's `with:` by `uses`. Step types from \
            --plugin-path or $ORCHESTRATE_PLUGIN_PATH are included too.

            Example:
              orchestrate schema workflow > schemas/workflow.schema.json
            """,
        shouldDisplay: false,
        subcommands: [Workflow.self])

    struct Workflow: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The JSON Schema of workflow files.")

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let catalog = RegistryStepCatalog(registry: global.loadPlugins())
            let types = catalog.stepTypeIDs.compactMap(catalog.stepInfo(for:))
            Terminal.line(WorkflowSchema.document(stepTypes: types).prettyJSONText)
        }
    }
}
