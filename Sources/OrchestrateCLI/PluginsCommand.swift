import ArgumentParser
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateOperations
import OrchestratePluginHost

struct PluginsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plugins",
        abstract: "List the loaded plugins' step types, or show one in full.",
        discussion: """
            Examples:
              orchestrate plugins list
              orchestrate plugins inspect http.download
              orchestrate plugins inspect example.hello --plugin-path ./hello.so
            """,
        subcommands: [List.self, Inspect.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List every step type, with its plugin and version.",
            discussion: """
                Examples:
                  orchestrate plugins list
                  orchestrate plugins list --plugin-path ./build --json | jq -r .id
                """)

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let registry = global.loadPlugins()
            if global.json {
                for type in registry.stepTypes { Terminal.line(StepTypeDocument.json(type).jsonText) }
                return
            }
            let width = max(registry.stepTypes.map(\.id.count).max() ?? 0, 8)
            for type in registry.stepTypes {
                Terminal.line("\(type.id.padding(width)) \(type.version.padding(8)) \(type.pluginName.padding(8)) \(type.summary)")
            }
            for plugin in registry.plugins { Terminal.line(Terminal.styled("plugin \(plugin.name) \(plugin.version): \(plugin.path)", .dim)) }
        }
    }

    struct Inspect: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a step type's documentation and its input and output schemas.",
            discussion: """
                Examples:
                  orchestrate plugins inspect http.download
                  orchestrate plugins inspect sftp         # every step type of the plugin
                  orchestrate plugins inspect fs.copy --json | jq .input_schema
                """)

        @Argument(help: "A step type id (http.request) or a plugin name (http).")
        var id: String

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let registry = global.loadPlugins()
            let types = registry.stepType(id).map { [$0] } ?? registry.stepTypes.filter { $0.pluginName == id }
            guard !types.isEmpty else { throw CLIFailure.usage("no step type or plugin named '\(id)'") }
            for type in types {
                if global.json {
                    Terminal.line(StepTypeDocument.json(type).jsonText)
                    continue
                }
                Terminal.line(Terminal.styled("\(type.id) \(type.version)", .bold) + " — \(type.summary)")
                Terminal.line("plugin: \(type.pluginName) (\(type.pluginPath))")
                if type.acceptsItems { Terminal.line("accepts items while it runs (orchestrate add-path)") }
                if let doc = type.documentation, !doc.isEmpty { Terminal.line("\n" + doc) }
                Terminal.line("\ninputs (with:):\n" + SchemaSummary.describe(type.inputSchema))
                if let output = type.outputSchema { Terminal.line("outputs:\n" + SchemaSummary.describe(output)) }
            }
        }
    }
}

/// A JSON Schema's top-level properties as readable lines.
enum SchemaSummary {
    static func describe(_ schema: JSONValue) -> String {
        guard let properties = schema["properties"]?.objectValue else { return "  " + schema.jsonText }
        let required = Set(schema["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        return properties.keys.sorted().map { name in
            let p = properties[name]!
            var type = p["type"]?.stringValue ?? p["type"]?.arrayValue?.compactMap(\.stringValue).joined(separator: "|") ?? "any"
            if let values = p["enum"]?.arrayValue { type = values.map(\.jsonText).joined(separator: "|") }
            var line = "  \(name.padding(18)) \(type.padding(10))"
            line += required.contains(name) ? " required" : "         "
            if let def = p["default"] { line += " default \(def.jsonText)" }
            if let text = p["description"]?.stringValue { line += "  \(text)" }
            return line
        }.joined(separator: "\n")
    }
}

extension String {
    func padding(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
