import Foundation
import Hummingbird
import HTTPTypes
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateModel
import OrchestrateOperations
import OrchestrateStore

/// `/api/runs…`: list, detail, submit, control verbs, delete, add paths.
enum RunRoutes {
    static func add(to router: Router<APIContext>, services: APIServices) {
        router.get("/api/runs") { request, _ in
            let query = try RunQuery(request)
            return try await services.readCache.jsonBytes(ReadCache.key(request)) {
                try await services.blocking {
                    let runs = try RunListing.runs(services.store, statuses: query.statuses, filter: query.filter)
                    return try RunDocument.summariesBytes(runs, store: services.store)
                }
            }
        }

        router.get("/api/runs/{id}") { request, context in
            let id = try context.parameters.runID()
            let window = try ItemWindowQuery.window(request)
            return try await services.readCache.jsonBytes(ReadCache.key(request)) {
                let detail = try await services.blocking { () -> [UInt8]? in
                    guard let record = try services.store.runDetail(id, items: window) else { return nil }
                    let graph = services.graphs.graphText(record.run)
                    return RunDocument.detailBytes(record, adding: graph.map { ["graph": $0] } ?? [:])
                }
                guard let detail else { throw Problem(.notFound, "no run \(id)") }
                return detail
            }
        }

        router.post("/api/runs") { request, context in
            let submission = try SubmissionRequest(try await request.jsonObject(context), workflows: services.workflows)
            let detail = try await services.blocking { try submission.submit(services) }
            var response = JSONResponse.make(detail, status: .created)
            response.headers[.location] = "/api/runs/\(detail["id"]?.stringValue ?? "")"
            return response
        }

        router.post("/api/runs/{id}/paths") { request, context in
            let id = try context.parameters.runID()
            let body = try await request.jsonObject(context)
            let step = try body.string("step")
            let pairs = try pathPairs(body)
            let items = try await services.blocking { () -> [JSONValue] in
                let paths = SessionPaths(store: services.store, registry: services.registry)
                do {
                    let target = try paths.target(runID: id, step: step)
                    return try stride(from: 0, to: pairs.count, by: SessionPaths.batchSize).flatMap { start in
                        try paths.add(runID: id, step: target.step, Array(pairs[start..<min(start + SessionPaths.batchSize, pairs.count)]))
                    }
                } catch let refusal as SessionPaths.Refusal {
                    throw Problem(refusal.description.hasPrefix("no run ") ? .notFound : .conflict, refusal.description)
                }
            }
            return JSONResponse.make(["items": .array(items)], status: .created)
        }

        router.post("/api/runs/{id}/{verb}") { _, context in
            let id = try context.parameters.runID()
            let name = try context.parameters.decoded("verb")
            guard let verb = QueueControl.Verb(rawValue: name), verb != .delete else {
                let verbs = QueueControl.Verb.allCases.filter { $0 != .delete }.map(\.rawValue).joined(separator: ", ")
                throw Problem(.notFound, "no verb '\(name)'; one of \(verbs) (delete is DELETE /api/runs/{id})")
            }
            return try await control(verb, id: id, services: services)
        }

        router.delete("/api/runs/{id}") { _, context in
            try await control(.delete, id: try context.parameters.runID(), services: services)
        }
    }

    /// Applies a verb through the same `QueueControl` the CLI uses: a missing run is 404, a
    /// verb the run's state refuses is 409.
    static func control(_ verb: QueueControl.Verb, id: String, services: APIServices) async throws -> Response {
        let message = try await services.blocking { () -> String in
            guard try services.store.run(id) != nil else { throw Problem(.notFound, "no run \(id)") }
            do {
                return try services.queueControl.apply(verb, to: id)
            } catch let refusal as QueueControl.Refusal {
                throw Problem(.conflict, refusal.description)
            }
        }
        return JSONResponse.make(["id": .string(id), "verb": .string(verb.rawValue), "message": .string(message)])
    }

    /// `{"source", "destination"}` or `{"paths": [{"source", "destination"}, …]}` (not both, nothing
    /// else: what the OpenAPI document says); sources must be absolute: they are read by the node
    /// that holds the run, not relative to anything the client knows.
    static func pathPairs(_ body: [String: JSONValue]) throws -> [(source: String, destination: String)] {
        let known: Set<String> = ["step", "source", "destination", "paths"]
        if let unknown = body.keys.sorted().first(where: { !known.contains($0) }) {
            throw Problem(.badRequest, "unknown member '\(unknown)'; known: \(known.sorted().joined(separator: ", "))")
        }
        let entries: [[String: JSONValue]]
        if let list = body["paths"] {
            guard body["source"] == nil && body["destination"] == nil else {
                throw Problem(.badRequest, "give source and destination, or paths, not both")
            }
            guard let array = list.arrayValue, !array.isEmpty else { throw Problem(.badRequest, "'paths' must be a non-empty array") }
            entries = try array.map {
                guard let object = $0.objectValue, object.keys.allSatisfy({ $0 == "source" || $0 == "destination" }) else {
                    throw Problem(.badRequest, "each of 'paths' must be an object {source, destination}")
                }
                return object
            }
        } else {
            entries = [body]
        }
        return try entries.map { entry in
            guard let source = try entry.string("source"), let destination = try entry.string("destination") else {
                throw Problem(.badRequest, "a path needs 'source' and 'destination'")
            }
            guard source.hasPrefix("/") else {
                throw Problem(.unprocessableContent, "source '\(source)' must be an absolute path on the node that holds the run")
            }
            return (source, destination)
        }
    }
}

/// The filters of `GET /api/runs`: `status`, `label` (KEY=VALUE), `queue` (each repeatable, any
/// of them matches), `workflow` (name), `text` (in the id, workflow, file or a label), `limit`
/// (the newest N, default 100, at most 1000).
struct RunQuery: Sendable {
    var statuses: Set<String> = []
    var labels: [String: String] = [:]
    var queues: Set<String>?
    var workflow: String?
    var text: String?
    var limit = 100

    init(_ request: Request) throws {
        let parameters = request.uri.queryParameters
        for status in parameters.getAll("status") {
            guard RunDocument.knownStatuses.contains(status) else {
                throw Problem(.badRequest, "unknown status '\(status)'; one of \(RunDocument.knownStatuses.sorted().joined(separator: ", "))")
            }
            statuses.insert(status)
        }
        for pair in parameters.getAll("label") {
            // Split at the first "=" byte, not Character: "=" followed by a combining mark or an
            // emoji modifier is one Character, and still the separator.
            let bytes = Array(pair.utf8)
            guard let eq = bytes.firstIndex(of: UInt8(ascii: "=")), eq > 0 else {
                throw Problem(.badRequest, "label takes KEY=VALUE, got '\(pair)'")
            }
            labels[String(decoding: bytes[..<eq], as: UTF8.self)] = String(decoding: bytes[(eq + 1)...], as: UTF8.self)
        }
        let queueNames = parameters.getAll("queue")
        if !queueNames.isEmpty { queues = Set(queueNames) }
        workflow = parameters.get("workflow")
        text = parameters.get("text").flatMap { $0.isEmpty ? nil : $0.lowercased() }
        if let value = parameters.get("limit") {
            guard let n = Int(value), (1...1000).contains(n) else { throw Problem(.badRequest, "limit must be 1 to 1000, not '\(value)'") }
            limit = n
        }
    }

    /// The filter the store applies (the statuses apart: `RunListing` judges them).
    var filter: RunFilter {
        var filter = RunFilter(labels: labels, queues: queues, workflow: workflow, limit: limit)
        filter.text = text
        return filter
    }
}
