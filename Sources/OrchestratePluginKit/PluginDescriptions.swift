#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import COrchestratePlugin
import OrchestrateJSON

/// Builds the C description (`orc_plugin`, `orc_step_type`s, their strings) of a
/// `PluginDefinition`, once, and routes run calls to the right `StepDefinition`.
///
/// Everything allocated here lives for the process (the ABI requires the description to stay
/// valid and unchanged), so nothing is ever freed. All step types share one C run function,
/// which finds the Swift type by `orc_step_call.step_type`: step ids are globally unique.
enum PluginDescriptions {
    private static let lock = Lock()
    nonisolated(unsafe) private static var built: [ObjectIdentifier: UnsafeRawPointer] = [:]
    nonisolated(unsafe) private static var stepsByID: [String: any StepDefinition.Type] = [:]

    static func description<P: PluginDefinition>(of plugin: P.Type) -> UnsafeRawPointer {
        lock.withLock {
            if let existing = built[ObjectIdentifier(plugin)] { return existing }
            let steps = P.steps
            let table = UnsafeMutablePointer<UnsafePointer<orc_step_type>?>.allocate(capacity: max(steps.count, 1))
            for (index, step) in steps.enumerated() {
                stepsByID[step.id] = step
                table[index] = UnsafePointer(describe(step))
            }
            let description = UnsafeMutablePointer<orc_plugin>.allocate(capacity: 1)
            var p = orc_plugin()
            p.struct_size = UInt32(MemoryLayout<orc_plugin>.size)
            p.abi_major = UInt32(ORC_ABI_VERSION_MAJOR)
            p.abi_minor = UInt32(ORC_ABI_VERSION_MINOR)
            p.step_type_count = UInt32(steps.count)
            p.name = permanent(P.name)
            p.version = permanent(P.version)
            p.summary = permanent(P.summary)
            p.step_types = UnsafePointer(table)
            description.initialize(to: p)
            built[ObjectIdentifier(plugin)] = UnsafeRawPointer(description)
            return UnsafeRawPointer(description)
        }
    }

    static func step(_ id: String) -> (any StepDefinition.Type)? {
        lock.withLock { stepsByID[id] }
    }

    private static func describe(_ step: any StepDefinition.Type) -> UnsafeMutablePointer<orc_step_type> {
        var s = orc_step_type()
        s.struct_size = UInt32(MemoryLayout<orc_step_type>.size)
        s.flags = (step.acceptsItems ? UInt32(ORC_STEP_ACCEPTS_ITEMS) : 0)
            | (step.opensSession ? UInt32(ORC_STEP_OPENS_SESSION) : 0)
        s.id = permanent(step.id)
        s.version = permanent(step.version)
        s.summary = permanent(step.summary)
        s.documentation = step.documentation.isEmpty ? nil : permanent(step.documentation)
        s.input_schema = permanent(step.inputSchema)
        s.output_schema = step.outputSchema.isEmpty ? nil : permanent(step.outputSchema)
        s.run = { call, api, host in StepRunner.run(call: call, api: api, host: host) }
        if step.opensSession {
            s.close_session = { stepType, outputsJSON in
                guard let stepType, let outputsJSON, let definition = PluginDescriptions.step(String(cString: stepType)),
                      let outputs = try? JSONValue(parsing: String(cString: outputsJSON))
                else { return }
                definition.closeSession(outputs: outputs)
            }
        }
        let pointer = UnsafeMutablePointer<orc_step_type>.allocate(capacity: 1)
        pointer.initialize(to: s)
        return pointer
    }

    /// A C copy of `string` that is never freed.
    private static func permanent(_ string: String) -> UnsafePointer<CChar> {
        UnsafePointer(strdup(string)!)
    }
}
