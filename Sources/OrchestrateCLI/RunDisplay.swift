import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateStore

/// How `status` and `list` describe a run, including what the stored status cannot say by
/// itself: a "running" run whose owner died is shown as interrupted (resumable).
enum RunDisplay {
    static func effectiveStatus(_ run: RunRecord) -> String {
        guard run.status == .running || run.status == .compensating else { return run.status.rawValue }
        return run.ownerIsLive ? run.status.rawValue : "interrupted"
    }

    static func json(_ run: RunRecord, steps: [StepRecord]? = nil) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(run.id), "workflow": .string(run.workflowName), "file": .string(run.workflowFile),
            "status": .string(effectiveStatus(run)), "created_at": .double(run.createdAt),
            "inputs": run.inputs, "labels": .object(run.labels.mapValues { .string($0) }), "priority": .int(Int64(run.priority)),
        ]
        if let rate = run.maxRate { object["max_rate"] = .int(rate) }
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

    static func json(_ item: ItemRecord) -> JSONValue {
        var object: [String: JSONValue] = ["id": .string(item.id), "step": .string(item.stepID), "status": .string(item.status.rawValue),
                                           "item": (try? JSONValue(parsing: item.json)) ?? .string(item.json)]
        if let error = item.error { object["error"] = .string(error) }
        return .object(object)
    }

    /// Steps in the order they started, unstarted ones last.
    static func stepOrder(_ a: StepRecord, _ b: StepRecord) -> Bool {
        let ta = a.startedAt ?? .infinity, tb = b.startedAt ?? .infinity
        return ta == tb ? a.id < b.id : ta < tb
    }

    /// "1.2 GiB of 4.0 GiB (30%), 1m12s elapsed, 17.1 MiB/s, about 2m48s left"
    static func describe(_ stats: TransferStatistics) -> String {
        var text = ProgressFormat.bytes(stats.bytesDone)
        if let total = stats.bytesTotal, total > 0 {
            text += " of \(ProgressFormat.bytes(total)) (\(Int(Double(stats.bytesDone) * 100 / Double(total)))%)"
        }
        text += ", \(seconds(stats.elapsed)) elapsed, \(ProgressFormat.bytes(Int64(stats.averageRate)))/s"
        if let remaining = stats.remaining { text += ", about \(seconds(remaining)) left" }
        return text
    }

    static func seconds(_ s: Double) -> String {
        let t = Int(s.rounded())
        if t < 60 { return "\(t)s" }
        if t < 3600 { return "\(t / 60)m\(String(format: "%02d", t % 60))s" }
        return "\(t / 3600)h\(String(format: "%02d", t % 3600 / 60))m"
    }

    static func time(_ t: Double?) -> String {
        guard let t else { return "-" }
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: Date(timeIntervalSince1970: t))
    }
}
