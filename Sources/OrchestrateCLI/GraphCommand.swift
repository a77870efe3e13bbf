import ArgumentParser
import OrchestrateModel

struct GraphCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "graph",
        abstract: "Print a workflow's step graph as Mermaid or Graphviz DOT.",
        discussion: """
            Edges follow `needs`. Compensations are drawn as dashed edges to their own node.

            Examples:
              orchestrate graph workflows/vimeo-upload.yaml     # Mermaid, for Markdown
              orchestrate graph flow.yaml --format dot | dot -Tsvg > flow.svg
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case mermaid, dot }

    @Argument(help: "The workflow file.")
    var file: String

    @Option(help: "mermaid or dot.")
    var format: Format = .mermaid

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let workflow = try WorkflowLoading.load(path: file, registry: global.loadPlugins(quiet: true))
        Terminal.write(format == .mermaid ? GraphRendering.mermaid(workflow) : GraphRendering.dot(workflow))
    }
}

/// Text renderings of the step graph.
enum GraphRendering {
    static func mermaid(_ workflow: Workflow) -> String {
        var out = "flowchart TD\n"
        for step in workflow.steps {
            let label = step.forEach != nil ? "\(step.id)[]<br/>\(step.uses)" : "\(step.id)<br/>\(step.uses)"
            out += "  \(node(step.id))[\"\(escape(label))\"]\n"
            if let compensate = step.compensate {
                out += "  \(node(step.id))_undo([\"undo: \(escape(compensate.uses))\"])\n"
                out += "  \(node(step.id)) -.-> \(node(step.id))_undo\n"
            }
        }
        for step in workflow.steps {
            for need in step.needs { out += "  \(node(need)) --> \(node(step.id))\n" }
        }
        return out
    }

    static func dot(_ workflow: Workflow) -> String {
        var out = "digraph \"\(escape(workflow.name))\" {\n  rankdir=TB;\n  node [shape=box];\n"
        for step in workflow.steps {
            out += "  \"\(escape(step.id))\" [label=\"\(escape(step.id))\\n\(escape(step.uses))\"];\n"
            if let compensate = step.compensate {
                out += "  \"\(escape(step.id))_undo\" [label=\"undo: \(escape(compensate.uses))\", style=dashed];\n"
                out += "  \"\(escape(step.id))\" -> \"\(escape(step.id))_undo\" [style=dashed];\n"
            }
        }
        for step in workflow.steps {
            for need in step.needs { out += "  \"\(escape(need))\" -> \"\(escape(step.id))\";\n" }
        }
        return out + "}\n"
    }

    private static func node(_ id: String) -> String {
        "s_" + id.map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined()
    }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}
