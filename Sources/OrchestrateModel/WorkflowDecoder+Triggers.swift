// `on:` → `WorkflowTriggers`. Each trigger kind has its own decoding function; this file
// holds the `on:` mapping itself and `on.schedule` (`on.watch`: WorkflowDecoder+Watch.swift).
import Foundation
import OrchestrateJSON

extension WorkflowDecoder {
    /// The kinds of trigger `on:` may hold.
    static let triggerFields = ["schedule", "watch"]
    static let scheduleFields = ["cron", "timezone", "inputs", "overlap", "catchup"]

    /// `on:`; needs `w.inputs` decoded already (schedule inputs are checked against them).
    mutating func decodeTriggers(_ pair: YAMLPair, into w: inout DecodedWorkflow) {
        if pair.value.scalar?.jsonValue.isNull == true { return }
        guard let fields = reader.fields(of: pair.value, place: "in 'on'", allowed: Self.triggerFields, what: "'on'") else {
            return
        }
        if let schedule = fields["schedule"] { w.triggers.schedules = decodeSchedules(schedule, inputs: w.inputs) }
        if let watch = fields["watch"], let (trigger, syntax) = decodeWatch(watch) {
            w.triggers.watch = trigger
            w.watchSyntax = syntax
        }
    }

    /// `on.schedule`: a list of entries, or one entry written as a mapping.
    private mutating func decodeSchedules(_ pair: YAMLPair, inputs: [InputDeclaration]) -> [ScheduleTrigger] {
        let entries: [YAMLNode]
        if pair.value.pairs != nil { entries = [pair.value] }
        else if let items = pair.value.items { entries = items }
        else {
            reader.bag.error("'schedule' must be a list of { cron, timezone, inputs, overlap, catchup }, not "
                             + pair.value.kindDescription, at: pair.value.location)
            return []
        }
        return entries.compactMap { decodeSchedule($0, inputs: inputs) }
    }

    private mutating func decodeSchedule(_ node: YAMLNode, inputs: [InputDeclaration]) -> ScheduleTrigger? {
        guard let f = reader.fields(of: node, place: "in a schedule", allowed: Self.scheduleFields, what: "a schedule entry")
        else { return nil }
        var ok = true
        var cron: CronExpression?
        if let c = f["cron"] {
            if let text = reader.string(c) {
                do {
                    let parsed = try CronExpression.parse(text)
                    if parsed.canFire { cron = parsed } else {
                        reader.bag.error("the cron expression '\(text)' never fires (no month has that day)", at: c.value.location)
                    }
                } catch {
                    reader.bag.error(error.message, at: reader.source.location(ofValueOffset: error.offset, in: c.value))
                }
            }
        } else {
            reader.bag.error("schedule entry is missing required field 'cron' (e.g. cron: \"0 2 * * *\")", at: node.location)
        }
        var zone: TimeZone?
        if let z = f["timezone"], let name = reader.string(z) {
            zone = TimeZone(identifier: name)
            if zone == nil {
                ok = false
                reader.bag.error("unknown time zone '\(name)': use an IANA name such as Europe/Berlin or UTC"
                                 + didYouMean(name, TimeZone.knownTimeZoneIdentifiers), at: z.value.location)
            }
        }
        var overlap = ScheduleOverlap.skip
        if let o = f["overlap"], let text = reader.string(o) {
            if let value = ScheduleOverlap(rawValue: text) { overlap = value } else {
                ok = false
                reader.bag.error("'overlap' is 'skip' or 'queue', not '\(text)'", at: o.value.location)
            }
        }
        let catchup = f["catchup"].flatMap { reader.duration($0, positive: true) }
        if f["catchup"] != nil && catchup == nil { ok = false }
        let values = f["inputs"].map { scheduleInputs($0, declared: inputs) } ?? [:]
        // Required inputs not written at all (one written wrong is reported as such already).
        let written = Set(f["inputs"]?.value.pairs?.map(\.name) ?? [])
        let missing = inputs.filter { $0.required && !written.contains($0.name) }.map(\.name)
        if !missing.isEmpty {
            ok = false
            reader.bag.error("schedule entry does not give required input\(missing.count > 1 ? "s" : "") "
                             + missing.map { "'\($0)'" }.joined(separator: ", ") + " (add it under 'inputs:')",
                             at: f["inputs"]?.key.location ?? node.location)
        }
        guard ok, let cron else { return nil }
        return ScheduleTrigger(cron: cron, timeZone: zone, inputs: values, overlap: overlap, catchup: catchup,
                               location: node.location)
    }

    /// A schedule's `inputs:`: literal values, each checked against its declaration.
    private mutating func scheduleInputs(_ pair: YAMLPair, declared: [InputDeclaration]) -> [String: JSONValue] {
        if pair.value.scalar?.jsonValue.isNull == true { return [:] }
        guard pair.value.pairs != nil else {
            reader.bag.error("a schedule's 'inputs' must be a mapping of input values, not \(pair.value.kindDescription)",
                             at: pair.value.location)
            return [:]
        }
        var out: [String: JSONValue] = [:]
        for (name, p) in TemplateBuilder.uniquePairs(pair.value, noun: "input", bag: &reader.bag) {
            guard let declaration = declared.first(where: { $0.name == name }) else {
                let known = declared.isEmpty ? "this workflow declares no inputs" : "known inputs: \(declared.map(\.name).joined(separator: ", "))"
                reader.bag.error("unknown input '\(name)'\(didYouMean(name, declared.map(\.name))) (\(known))", at: p.key.location)
                continue
            }
            let value = literal(p.value)
            if case .string(let s) = value, s.contains("${{") {
                reader.bag.error("schedule inputs are plain values: expressions are not evaluated here", at: p.value.location)
                continue
            }
            // Relative paths are made absolute when the workflow is registered (against its folder).
            switch declaration.check(value, currentDirectory: "/") {
            case .success: out[name] = value
            case .failure(let problem): reader.bag.error(problem.message, at: p.value.location)
            }
        }
        return out
    }

    /// A YAML value as plain JSON.
    private mutating func literal(_ node: YAMLNode) -> JSONValue {
        switch node.kind {
        case .scalar(let s): return s.jsonValue
        case .sequence(let items): return .array(items.map { literal($0) })
        case .mapping:
            var o: [String: JSONValue] = [:]
            for (name, p) in TemplateBuilder.uniquePairs(node, bag: &reader.bag) { o[name] = literal(p.value) }
            return .object(o)
        }
    }
}
