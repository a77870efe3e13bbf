import COrchestratePlugin
import OrchestrateJSON

/// Checks the `orc_plugin` description a library's entry returned and copies it into Swift
/// values. A plugin is refused as a whole at the first problem found, with a reason naming the
/// field (`step_types[2].input_schema is not valid JSON: ...`), because a half-loaded plugin
/// would only move the confusion to the first workflow that uses it.
enum DescriptorReader {
    static let hostMajor = UInt32(ORC_ABI_VERSION_MAJOR)
    static let hostMinor = UInt32(ORC_ABI_VERSION_MINOR)
    /// `orc_plugin.step_type_count` limit stated in the header.
    static let maxStepTypes: UInt32 = 1024

    static func read(_ plugin: UnsafePointer<orc_plugin>, path: String) throws(LoadProblem) -> LoadedPlugin {
        // struct_size and the two version fields are the part of the layout every version shares.
        let structSize = plugin.pointee.struct_size
        guard structSize >= 12 else {
            throw LoadProblem("orc_plugin.struct_size is \(structSize), too small to hold even the ABI version")
        }
        let major = plugin.pointee.abi_major, minor = plugin.pointee.abi_minor
        guard major == hostMajor, minor <= hostMinor else {
            throw LoadProblem("built for plugin ABI \(major).\(minor); this orchestrate speaks \(hostMajor).\(hostMinor) "
                + "(needs major \(hostMajor), minor <= \(hostMinor))")
        }
        let fullSize = MemoryLayout<orc_plugin>.size
        guard structSize >= fullSize else {
            throw LoadProblem("orc_plugin.struct_size is \(structSize), smaller than orc_plugin \(hostMajor).0 (\(fullSize) bytes)")
        }
        let p = plugin.pointee
        let name = try string(p.name, "orc_plugin.name")
        guard !name.isEmpty else { throw LoadProblem("orc_plugin.name is empty") }
        let version = try string(p.version, "orc_plugin.version")
        let summary = try optionalString(p.summary, "orc_plugin.summary") ?? ""
        guard p.step_type_count <= maxStepTypes else {
            throw LoadProblem("orc_plugin.step_type_count is \(p.step_type_count), more than the limit of \(maxStepTypes)")
        }
        guard p.step_type_count == 0 || p.step_types != nil else {
            throw LoadProblem("orc_plugin.step_types is NULL but step_type_count is \(p.step_type_count)")
        }
        var steps: [StepType] = []
        var seen: Set<String> = []
        for index in 0..<Int(p.step_type_count) {
            guard let stepPointer = p.step_types[index] else { throw LoadProblem("step_types[\(index)] is NULL") }
            let step = try readStep(stepPointer, index: index, pluginName: name, pluginPath: path)
            guard seen.insert(step.id).inserted else {
                throw LoadProblem("step type \(step.id) is declared twice (step_types[\(index)])")
            }
            steps.append(step)
        }
        return LoadedPlugin(path: path, name: name, version: version, summary: summary,
                            abiMajor: major, abiMinor: minor, stepTypes: steps)
    }

    private static func readStep(_ step: UnsafePointer<orc_step_type>, index: Int, pluginName: String,
                                 pluginPath: String) throws(LoadProblem) -> StepType
    {
        let field = "step_types[\(index)]"
        // A 1.0 step type ends after `run`; fields added since are read only when present.
        let size10 = MemoryLayout<orc_step_type>.offset(of: \orc_step_type.run)! + MemoryLayout<orc_step_run_fn?>.size
        let size = Int(step.pointee.struct_size)
        guard size >= size10 else {
            throw LoadProblem("\(field).struct_size is \(size), smaller than orc_step_type 1.0 (\(size10) bytes)")
        }
        // Copy only what the plugin filled; newer fields stay zero (NULL) for older plugins.
        var s = orc_step_type()
        withUnsafeMutablePointer(to: &s) { target in
            UnsafeMutableRawPointer(target).copyMemory(from: step, byteCount: min(size, MemoryLayout<orc_step_type>.size))
        }
        guard let cID = s.id else { throw LoadProblem("\(field).id is NULL") }
        guard let id = String(validatingCString: cID) else { throw LoadProblem("\(field).id is not valid UTF-8") }
        if let problem = stepIDLoadProblem(id) { throw LoadProblem("\(field).id \"\(id)\" \(problem)") }
        let prefix = "step type \(id)"
        guard let run = s.run else { throw LoadProblem("\(prefix): run is NULL") }
        let version = try string(s.version, "\(prefix): version")
        let summary = try optionalString(s.summary, "\(prefix): summary") ?? ""
        let documentation = try optionalString(s.documentation, "\(prefix): documentation")
        guard let inputText = try optionalString(s.input_schema, "\(prefix): input_schema") else {
            throw LoadProblem("\(prefix): input_schema is NULL (declare at least {\"type\":\"object\"})")
        }
        let inputSchema = try schema(inputText, "\(prefix): input_schema")
        var outputSchema: JSONValue?
        if let outputText = try optionalString(s.output_schema, "\(prefix): output_schema") {
            outputSchema = try schema(outputText, "\(prefix): output_schema")
        }
        let opensSession = s.flags & UInt32(ORC_STEP_OPENS_SESSION) != 0
        if opensSession && s.close_session == nil {
            throw LoadProblem("\(prefix): ORC_STEP_OPENS_SESSION is set but close_session is NULL")
        }
        return StepType(
            id: id, version: version, summary: summary, documentation: documentation,
            inputSchema: inputSchema, outputSchema: outputSchema,
            acceptsItems: s.flags & UInt32(ORC_STEP_ACCEPTS_ITEMS) != 0, opensSession: opensSession,
            pluginName: pluginName, pluginPath: pluginPath, run: run, closeSession: s.close_session, cID: cID)
    }

    /// Step ids are lower-case dot-separated words: `exec`, `fs.copy`, `http.upload-part`.
    static func stepIDLoadProblem(_ id: String) -> String? {
        if id.isEmpty { return "is empty" }
        if id.utf8.count > 128 { return "is longer than 128 bytes" }
        for segment in id.split(separator: ".", omittingEmptySubsequences: false) {
            guard let first = segment.utf8.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first) else {
                return "is not lower-case dot-separated words (each must start with a letter a-z)"
            }
            for c in segment.utf8 where !(UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c)
                && !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) && c != UInt8(ascii: "-") && c != UInt8(ascii: "_")
            {
                return "may contain only a-z, 0-9, '-', '_' and '.'"
            }
        }
        return nil
    }

    private static func string(_ p: UnsafePointer<CChar>?, _ field: String) throws(LoadProblem) -> String {
        guard let p else { throw LoadProblem("\(field) is NULL") }
        guard let s = String(validatingCString: p) else { throw LoadProblem("\(field) is not valid UTF-8") }
        return s
    }

    private static func optionalString(_ p: UnsafePointer<CChar>?, _ field: String) throws(LoadProblem) -> String? {
        guard let p else { return nil }
        return try string(p, field)
    }

    private static func schema(_ text: String, _ field: String) throws(LoadProblem) -> JSONValue {
        let value: JSONValue
        do { value = try JSONValue(parsing: text) } catch {
            throw LoadProblem("\(field) is not valid JSON: \(error)")
        }
        switch value {
        case .object, .bool: return value
        default: throw LoadProblem("\(field) is not a JSON Schema (an object or a boolean) but a \(value.typeName)")
        }
    }
}
