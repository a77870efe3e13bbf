import ArgumentParser
import OrchestrateEngine
import OrchestrateHTTPAPI
import OrchestrateJSON
import OrchestrateModel

/// Hidden: prints machine-made documents (the language's schema, the metrics), checked in and
/// kept fresh by tests.
struct SchemaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Print a JSON Schema of the workflow language.",
        discussion: """
            `orchestrate schema workflow` prints the JSON Schema editors use for workflow files \
            (schemas/workflow.schema.json is this, made with the built-in plugins only): the fields \
            of the language, and each step type's `with:` by `uses`. Step types from \
            --plugin-path or $ORCHESTRATE_PLUGIN_PATH are included too.

            `orchestrate schema metrics` prints the metrics `serve --http` exposes at /metrics, as \
            JSON (name, type, labels, help): docs/reference/metrics.md is made from it.

            Examples:
              orchestrate schema workflow > schemas/workflow.schema.json
              orchestrate schema metrics
            """,
        shouldDisplay: false,
        subcommands: [Workflow.self, Metrics.self])

    struct Workflow: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The JSON Schema of workflow files.")

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let catalog = RegistryStepCatalog(registry: global.loadPlugins())
            let types = catalog.stepTypeIDs.compactMap(catalog.stepInfo(for:))
            Terminal.line(WorkflowSchema.document(stepTypes: types).prettyJSONText)
        }
    }

    struct Metrics: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The metrics of /metrics, as JSON.")

        func run() throws {
            let metrics: [JSONValue] = MetricDefinition.all.map {
                ["name": .string($0.fullName), "type": .string($0.kind.rawValue),
                 "labels": .array($0.labels.map { .string($0) }), "help": .string($0.help)]
            }
            Terminal.line(JSONValue.array(metrics).prettyJSONText)
        }
    }
}
