import Hummingbird
import OrchestrateJSON

/// `GET /api/journal?after=SEQ&limit=N[&run=ID]`: a page of the journal as JSON, in the
/// `events --json` form, for clients that page through it (`orchestrate events --server`)
/// rather than follow it as Server-Sent Events. Reading after the last seq seen misses nothing.
enum JournalRoute {
    static func add(to router: Router<APIContext>, services: APIServices) {
        router.get("/api/journal") { request, _ in
            let parameters = request.uri.queryParameters
            let after = try parameters.get("after").map { text -> Int64 in
                guard let seq = Int64(text), seq >= 0 else { throw Problem(.badRequest, "after must be an event seq (a non-negative integer), not '\(text)'") }
                return seq
            } ?? 0
            let limit = try parameters.get("limit").map { text -> Int in
                guard let n = Int(text), (1...1000).contains(n) else { throw Problem(.badRequest, "limit must be 1 to 1000, not '\(text)'") }
                return n
            } ?? 1000
            let runID = parameters.get("run")
            // A run that does not exist has no events (as `orchestrate events RUN` prints none).
            let (events, prunedThrough) = try await services.blocking {
                (try services.store.events(runID: runID, afterSeq: after, limit: limit).map(\.json), try services.store.prunedThrough())
            }
            return JSONResponse.make(["events": .array(events), "pruned_through": .int(prunedThrough)])
        }
    }
}
