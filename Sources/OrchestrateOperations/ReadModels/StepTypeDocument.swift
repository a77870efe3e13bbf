import OrchestrateEngine
import OrchestrateJSON
import OrchestratePluginHost

/// A step type as JSON (`plugins … --json`, `GET /api/plugins`): identity, plugin, and the
/// input and output JSON Schemas.
public enum StepTypeDocument {
    public static func json(_ type: StepType) -> JSONValue {
        ["id": .string(type.id), "version": .string(type.version), "summary": .string(type.summary),
         "plugin": .string(type.pluginName), "path": .string(type.pluginPath), "accepts_items": .bool(type.acceptsItems),
         "documentation": type.documentation.map { .string($0) } ?? .null,
         "input_schema": type.inputSchema, "output_schema": type.outputSchema ?? .null]
    }
}
