import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateStore

/// A run as JSON, as `status --json`, `list --json` and the HTTP API show it, including what
/// the stored status cannot say by itself: a "running" run whose owner died is shown as
/// interrupted (resumable). Holds no secrets: the journal holds none.
public enum RunDocument {
    public static func effectiveStatus(_ run: RunRecord) -> String {
        guard run.status == .running || run.status == .compensating else { return run.status.rawValue }
        return run.ownerIsLive ? run.status.rawValue : "interrupted"
    }

    /// The statuses `effectiveStatus` can return, for validating filters.
    public static let knownStatuses = Set(RunStatus.allCases.map(\.rawValue) + ["interrupted"])

    /// The run's record, with its steps when given.
    public static func json(_ run: RunRecord, steps: [StepRecord]? = nil) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(run.id), "workflow": .string(run.workflowName), "file": .string(run.workflowFile),
            "status": .string(effectiveStatus(run)), "created_at": .double(run.createdAt),
            "inputs": run.inputs, "labels": .object(run.labels.mapValues { .string($0) }), "priority": .int(Int64(run.priority)),
        ]
        if let rate = run.maxRate { object["max_rate"] = .int(rate) }
        if let timetable = run.maxRateTimetable { object["max_rate_timetable"] = .string(timetable) }
        if let t = run.startedAt { object["started_at"] = .double(t) }
        if let t = run.finishedAt { object["finished_at"] = .double(t) }
        if let e = run.error { object["error"] = .string(e) }
        if let o = run.outputs { object["outputs"] = o }
        object["queue"] = .string(run.queue)
        if let owner = run.owner, run.ownerIsLive {
            object["node"] = .string(owner.node)
            object["owner"] = ["node": .string(owner.node), "pid": .int(Int64(owner.pid))]
        }
        if let steps {
            object["steps"] = .array(steps.sorted(by: stepOrder).map { s in
                var step: [String: JSONValue] = ["id": .string(s.id), "status": .string(s.status.rawValue),
                                                 "attempt": .int(Int64(s.attempt)), "kind": .string(s.kind.rawValue)]
                if let k = s.errorKind { step["error_kind"] = .string(k) }
                if let m = s.errorMessage { step["error"] = .string(m) }
                if let o = s.outputs { step["outputs"] = o }
                if let key = s.idempotencyKey { step["idempotency_key"] = .string(key) }
                if let t = s.startedAt { step["started_at"] = .double(t) }
                if let t = s.finishedAt { step["finished_at"] = .double(t) }
                if let node = s.node { step["node"] = .string(node) }
                return .object(step)
            })
        }
        return .object(object)
    }

    /// Runs as a list shows them: each record and its transfer figures (one store read for
    /// the figures of them all).
    public static func summaries(_ runs: [RunRecord], store: any StateStore) throws -> [JSONValue] {
        let progress = try store.latestProgress(runIDs: runs.map(\.id))
        return runs.map { run in
            var object = json(run).objectValue ?? [:]
            object["transfer"] = TransferStatistics.of(run, progress: progress[run.id] ?? []).json
            return .object(object)
        }
    }

    /// `["runs": summaries(runs)]` as compact JSON text (`jsonText`'s bytes), each run written
    /// straight into it, not built as a dictionary first (the HTTP API's run list, bench/api).
    public static func summariesBytes(_ runs: [RunRecord], store: any StateStore) throws -> [UInt8] {
        let progress = try store.latestProgress(runIDs: runs.map(\.id))
        var writer = JSONObjectText(capacity: 1024 + 768 * runs.count)
        writer.addObjects("runs", runs) { object, run in
            writeRun(&object, run, transfer: TransferStatistics.of(run, progress: progress[run.id] ?? []).json)
        }
        return writer.finish()
    }

    /// The members of `json(run)`, and `transfer` when given, in key order.
    private static func writeRun(_ object: inout JSONObjectText, _ run: RunRecord, transfer: JSONValue?) {
        object.add("created_at", .double(run.createdAt))
        if let e = run.error { object.add("error", .string(e)) }
        object.add("file", .string(run.workflowFile))
        if let t = run.finishedAt { object.add("finished_at", .double(t)) }
        object.add("id", .string(run.id))
        object.add("inputs", run.inputs)
        object.add("labels", .object(run.labels.mapValues { .string($0) }))
        if let rate = run.maxRate { object.add("max_rate", .int(rate)) }
        if let timetable = run.maxRateTimetable { object.add("max_rate_timetable", .string(timetable)) }
        let owner = run.ownerIsLive ? run.owner : nil
        if let owner { object.add("node", .string(owner.node)) }
        if let o = run.outputs { object.add("outputs", o) }
        if let owner { object.add("owner", ["node": .string(owner.node), "pid": .int(Int64(owner.pid))]) }
        object.add("priority", .int(Int64(run.priority)))
        object.add("queue", .string(run.queue))
        if let t = run.startedAt { object.add("started_at", .double(t)) }
        object.add("status", .string(effectiveStatus(run)))
        if let transfer { object.add("transfer", transfer) }
        object.add("workflow", .string(run.workflowName))
    }

    /// Everything about run `id`, or nil when there is no such run: record, steps, the files
    /// added to its persistent sessions ("items", when any), its transfer figures and the
    /// latest `step.progress` event of each step that reported progress ("progress", in the
    /// `events --json` form) (`status --json`, `GET /api/runs/{id}`; `status --server` prints it
    /// as `status` does). One store read (`StateStore.runDetail`), and one checkpoint read per
    /// step that made an attempt and can still resume: such a step shows where its partial file
    /// is (`partial`, see `PartialFiles`).
    public static func detail(ofRun id: String, store: any StateStore, items window: ItemWindow = .first) throws -> JSONValue? {
        guard let record = try store.runDetail(id, items: window) else { return nil }
        var object = detail(record).objectValue ?? [:]
        let resumable: Set<StepStatus> = [.pending, .running, .waitingRetry, .held]
        if !record.run.status.isFinished, let steps = object["steps"]?.arrayValue {
            object["steps"] = .array(steps.map { step in
                guard let id = step["id"]?.stringValue, let status = step["status"]?.stringValue.flatMap(StepStatus.init(rawValue:)),
                      resumable.contains(status), step["attempt"]?.intValue ?? 0 > 0, var fields = step.objectValue,
                      let partial = PartialFiles.existing(runID: record.run.id, stepID: id, store: store) else { return step }
                fields["partial"] = .string(partial)
                return .object(fields)
            })
        }
        return .object(object)
    }

    public static func detail(_ record: RunDetailRecord) -> JSONValue {
        var object = json(record.run, steps: record.steps).objectValue ?? [:]
        for (key, value) in itemsMembers(record) { object[key] = value }
        object["transfer"] = TransferStatistics.of(record.run, progress: record.progress).json
        object["progress"] = .array(record.progress.map(\.json))
        return .object(object)
    }

    /// `detail(record)` as compact JSON text (`jsonText`'s bytes), with `texts` added as members
    /// whose values are JSON text already (the API's cached graph), written without building the
    /// steps' objects first: a detail of a 200-step run is mostly its steps (bench/api).
    public static func detailBytes(_ record: RunDetailRecord, adding texts: [String: String] = [:]) -> [UInt8] {
        var object = detail(RunDetailRecord(run: record.run, steps: [], items: record.items, progress: record.progress))
            .objectValue ?? [:]
        object["steps"] = nil
        for (key, value) in itemsMembers(record) { object[key] = value }  // an item's state needs the steps'
        // Room for the whole text at once (about 150 bytes a step), not regrown as it is written.
        var writer = JSONObjectText(capacity: 4096 + 192 * record.steps.count + texts.values.reduce(0) { $0 + $1.utf8.count })
        for key in Set(object.keys).union(texts.keys).union(["steps"]).sorted() {
            if key == "steps" {
                // Sorted by position: a step record is too big to move around while sorting.
                let steps = record.steps
                let order = steps.indices.sorted { stepOrder(steps[$0], steps[$1]) }
                writer.addObjects("steps", order) { step, index in writeStep(&step, steps[index]) }
            } else if let text = texts[key] {
                writer.add(key, jsonText: text)
            } else if let value = object[key] {
                writer.add(key, value)
            }
        }
        return writer.finish()
    }

    /// One step of `json(_:steps:)`, its members in key order.
    private static func writeStep(_ step: inout JSONObjectText, _ s: StepRecord) {
        step.add("attempt", .int(Int64(s.attempt)))
        if let m = s.errorMessage { step.add("error", .string(m)) }
        if let k = s.errorKind { step.add("error_kind", .string(k)) }
        if let t = s.finishedAt { step.add("finished_at", .double(t)) }
        step.add("id", .string(s.id))
        if let key = s.idempotencyKey { step.add("idempotency_key", .string(key)) }
        step.add("kind", .string(s.kind.rawValue))
        if let node = s.node { step.add("node", .string(node)) }
        if let o = s.outputs { step.add("outputs", o) }
        if let t = s.startedAt { step.add("started_at", .double(t)) }
        step.add("status", .string(s.status.rawValue))
    }

    /// The members a run with items gets (none without): `items`, the window of them the record
    /// holds; `items_next`, the cursor of the next page when more follow; `items_total`; and
    /// `item_counts`, per step how many are `queued`, `running`, `done` and `failed`.
    static func itemsMembers(_ record: RunDetailRecord) -> [String: JSONValue] {
        let total = record.itemCounts.isEmpty ? record.items.count : record.itemCounts.reduce(0) { $0 + $1.count }
        guard total > 0 || !record.items.isEmpty else { return [:] }
        let moving = movingItems(record)
        var counts: [String: [String: JSONValue]] = [:]
        for count in record.itemCounts {
            var step = counts[count.stepID] ?? ["queued": 0, "running": 0, "done": 0, "failed": 0]
            step[count.status.rawValue] = .int(Int64(count.count))
            counts[count.stepID] = step
        }
        for (stepID, items) in moving where counts[stepID] != nil {
            // The store keeps a moving item `queued` until it ends (see `movingItems`).
            let queued = counts[stepID]?["queued"]?.intValue ?? 0, running = min(Int64(items.count), queued)
            counts[stepID]?["queued"] = .int(queued - running)
            counts[stepID]?["running"] = .int(running)
        }
        var members: [String: JSONValue] = ["items": itemsJSON(record, moving: moving), "items_total": .int(Int64(total)),
                                            "item_counts": .object(counts.mapValues { .object($0) })]
        if let next = record.itemsNext { members["items_next"] = .string(next.text) }
        return members
    }

    /// The window's items; those a session step is moving are `running`, with their
    /// `bytes_done`, `bytes_total` (-1 when unknown) and `rate`.
    private static func itemsJSON(_ record: RunDetailRecord, moving: [String: [String: JSONValue]]) -> JSONValue {
        return .array(record.items.map { item in
            guard item.status == .queued, let progress = moving[item.stepID]?[item.id] else { return json(item) }
            var object = json(item).objectValue ?? [:]
            object["status"] = .string("running")
            for key in ["bytes_done", "bytes_total", "rate"] { object[key] = progress[key] }
            return .object(object)
        })
    }

    /// The items a running run's session steps are moving, by step and item id: the `items` of
    /// each step's latest `step.progress` (`SessionItemsProgress`, journaled at most a second
    /// late). The store keeps such an item `queued` until it ends: a state written per item
    /// start would cost a store write per file of a session.
    private static func movingItems(_ record: RunDetailRecord) -> [String: [String: JSONValue]] {
        guard effectiveStatus(record.run) == RunStatus.running.rawValue else { return [:] }
        let running = Set(record.steps.filter { $0.status == .running }.map(\.id))
        var moving: [String: [String: JSONValue]] = [:]
        for event in record.progress {
            guard let step = event.step, running.contains(step), let items = event.data["items"]?.objectValue else { continue }
            moving[step] = items
        }
        return moving
    }

    public static func json(_ item: ItemRecord) -> JSONValue {
        var object: [String: JSONValue] = ["id": .string(item.id), "step": .string(item.stepID), "status": .string(item.status.rawValue),
                                           "item": (try? JSONValue(parsing: item.json)) ?? .string(item.json)]
        if let error = item.error { object["error"] = .string(error) }
        return .object(object)
    }

    /// Steps in the order they started, unstarted ones last.
    public static func stepOrder(_ a: StepRecord, _ b: StepRecord) -> Bool {
        let ta = a.startedAt ?? .infinity, tb = b.startedAt ?? .infinity
        return ta == tb ? a.id < b.id : ta < tb
    }
}
