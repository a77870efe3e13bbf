import OrchestrateModel
import OrchestratePluginHost

/// The plugin registry seen as the model's step catalog.
public struct RegistryStepCatalog: StepCatalog {
    public let registry: PluginRegistry

    public init(registry: PluginRegistry) {
        self.registry = registry
    }

    public var stepTypeIDs: [String] { registry.stepTypes.map(\.id) }

    public func stepInfo(for id: String) -> StepInfo? {
        guard let type = registry.stepType(id) else { return nil }
        return StepInfo(id: type.id, inputSchema: type.inputSchema, outputSchema: type.outputSchema,
                        acceptsItems: type.acceptsItems)
    }
}
