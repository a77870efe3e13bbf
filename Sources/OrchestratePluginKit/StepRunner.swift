import COrchestratePlugin

/// The bridge from one C run call to `StepDefinition.run`: builds the `StepContext`, runs the
/// step, and reports a thrown error through set_error.
enum StepRunner {
    static func run(call: UnsafePointer<orc_step_call>?, api: UnsafePointer<orc_host_api>?, host: OpaquePointer?) -> Int32 {
        // Every 1.0 callback must be there; an older host cannot run a step built with this kit.
        guard let call, let api, api.pointee.struct_size >= UInt32(MemoryLayout<orc_host_api>.size) else {
            return Int32(ORC_RUN_FAILED)
        }
        let id = call.pointee.step_type.map { String(cString: $0) } ?? ""
        guard let definition = PluginDescriptions.step(id) else {
            report(.permanent("this plugin has no step type '\(id)'", code: "unknown_step"), api, host)
            return Int32(ORC_RUN_FAILED)
        }
        let context: StepContext
        do {
            context = try StepContext(call: call, api: api, host: host)
        } catch {
            report(error, api, host)
            return Int32(ORC_RUN_FAILED)
        }
        do {
            try definition.run(context)
            return Int32(ORC_RUN_OK)
        } catch let error as StepError {
            report(error, api, host)
        } catch {
            // An error that is not a StepError: permanent, unless it is the fallout of a cancel.
            let text = String(describing: error)
            report(context.isCancelled ? .cancelled(text) : .permanent(text), api, host)
        }
        return Int32(ORC_RUN_FAILED)
    }

    private static func report(_ error: StepError, _ api: UnsafePointer<orc_host_api>, _ host: OpaquePointer?) {
        let retryAfter = error.retryAfter.map { duration -> Int64 in
            let (seconds, attoseconds) = duration.components
            return max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        } ?? -1
        api.pointee.set_error(host, error.kind.rawValue, error.code, error.message, retryAfter)
    }
}
