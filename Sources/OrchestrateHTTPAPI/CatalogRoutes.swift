import Hummingbird
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateOperations
import OrchestrateStore
import OrchestrateTokenBucket

/// `/api/queues` (counts per named queue, the store-wide and per-queue passive switches), `/api/nodes` (the
/// machines sharing the store) and `/api/plugins` (step types with their schemas).
enum CatalogRoutes {
    static func add(to router: Router<APIContext>, services: APIServices) {
        router.get("/api/queues") { request, _ in
            try await services.readCache.json(ReadCache.key(request)) { try await services.blocking { () -> JSONValue in
                // Counted by the database; only runs stored as running or compensating are read,
                // to tell those whose owner died (shown as interrupted).
                var counts: [String: [String: Int64]] = [:]
                for count in try services.store.queueFigures().runs where count.status != .running && count.status != .compensating {
                    counts[count.queue, default: [:]][count.status.rawValue] = Int64(count.runs)
                }
                for run in try services.store.listRuns(RunFilter(statuses: [.running, .compensating])) {
                    counts[run.queue, default: [:]][RunDocument.effectiveStatus(run), default: 0] += 1
                }
                let passive = try services.store.passiveQueues()
                for name in passive where counts[name] == nil { counts[name] = [:] }
                let queues: [JSONValue] = counts.keys.sorted().map { name in
                    ["name": .string(name), "runs": .object(counts[name]!.mapValues { .int($0) }), "passive": .bool(passive.contains(name))]
                }
                return ["passive": .bool(try services.store.isQueuePassive()), "queues": .array(queues),
                        "max_rate": try services.store.queueRate().map { .string($0) } ?? .null]
            } }
        }

        // `queue stop|start`: a passive queue starts nothing and interrupts what runs, on every `serve`.
        // (Hummingbird's router takes one parameter name per position: the segment after
        // /api/queues/ is `{segment}` here and below, an action here, a queue's name below.)
        router.post("/api/queues/{segment}") { _, context in
            let action = try context.parameters.decoded("segment")
            guard action == "stop" || action == "start" else { throw Problem(.notFound, "no queue action '\(action)'; stop or start") }
            try await services.blocking { try services.store.setQueuePassive(action == "stop") }
            return JSONResponse.make(["passive": .bool(action == "stop")])
        }

        // `queue stop|start --queue NAME`: one named queue passive or active again, on every `serve`.
        router.post("/api/queues/{segment}/{action}") { _, context in
            let name = try context.parameters.decoded("segment")
            let action = try context.parameters.decoded("action")
            guard action == "stop" || action == "start" else { throw Problem(.notFound, "no queue action '\(action)'; stop or start") }
            guard QueueName.isValid(name) else { throw Problem(.badRequest, "queue '\(name)': \(QueueName.rule)") }
            try await services.blocking { try services.store.setQueuePassive(action == "stop", queue: name) }
            return JSONResponse.make(["queue": .string(name), "passive": .bool(action == "stop")])
        }

        // `queue rate`: {"max_rate": "20M" | "Mon-Fri 08:00,10M 19:00,off" | "off"} replaces every
        // serve's --max-rate, live; {"max_rate": null} gives each its own back.
        router.put("/api/queues/rate") { request, context in
            let body = try await request.jsonObject(context)
            if let unknown = body.keys.first(where: { $0 != "max_rate" }) { throw Problem(.badRequest, "unknown member '\(unknown)'; known: max_rate") }
            guard body["max_rate"] != nil else { throw Problem(.badRequest, "give max_rate: a rate, a timetable, or null to remove it") }
            var timetable: RateTimetable?
            if let text = try body.string("max_rate") {
                do { timetable = try RateTimetable.parse(text) } catch let error as RateTimetable.ParseError {
                    throw Problem(error.isConflict ? .unprocessableContent : .badRequest, "max_rate: \(error)")
                }
            }
            let text = timetable?.text
            try await services.blocking { try services.store.setQueueRate(text) }
            return JSONResponse.make(["max_rate": timetable.map { .string($0.text) } ?? .null])
        }

        router.get("/api/nodes") { request, _ in
            try await services.readCache.json(ReadCache.key(request)) {
                let nodes = try await services.blocking { try services.store.nodes() }
                return ["this_node": .string(NodeName.current), "nodes": .array(nodes.map(nodeDocument))]
            }
        }

        router.get("/api/plugins") { _, _ in
            let plugins: [JSONValue] = services.registry.plugins.map { plugin in
                ["name": .string(plugin.name), "version": .string(plugin.version), "path": .string(plugin.path)]
            }
            return JSONResponse.make(["plugins": .array(plugins),
                                      "step_types": .array(services.registry.stepTypes.map(StepTypeDocument.json))])
        }

        // A step type (`http.request`) or every step type of a plugin (`http`).
        router.get("/api/plugins/{id}") { _, context in
            let id = try context.parameters.decoded("id")
            let types = services.registry.stepType(id).map { [$0] } ?? services.registry.stepTypes.filter { $0.pluginName == id }
            guard !types.isEmpty else { throw Problem(.notFound, "no step type or plugin named '\(id)'") }
            return JSONResponse.make(["step_types": .array(types.map(StepTypeDocument.json))])
        }
    }

    static func nodeDocument(_ node: NodeRecord) -> JSONValue {
        var document: [String: JSONValue] = ["name": .string(node.name), "live": .bool(node.live), "runs_held": .int(Int64(node.runsHeld))]
        if let until = node.leaseUntil { document["lease_until"] = .double(until) }
        if let seen = node.lastWorkerEvent { document["last_worker_event"] = .double(seen) }
        document["workers"] = .array(node.workers.map { worker in
            ["pid": .int(Int64(worker.pid)), "started_at": .double(worker.startedAt), "live": .bool(worker.live),
             "queues": .array(worker.queues.map { .string($0) })]
        })
        return .object(document)
    }
}
