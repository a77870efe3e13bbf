import Hummingbird
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateOperations
import OrchestrateStore

/// `/api/schedules` (the registered schedule entries, as `schedules --json` shows them) and
/// `POST /api/schedules/{name}/pause|resume` (as `schedule pause|resume NAME`).
enum ScheduleRoutes {
    static func add(to router: Router<APIContext>, services: APIServices) {
        router.get("/api/schedules") { request, _ in
            try await services.readCache.json(ReadCache.key(request)) {
                try await services.blocking { () -> JSONValue in
                    let now = try ScheduleClock(store: services.store).now()
                    return ["schedules": .array(try services.store.schedules().map { ScheduleDocument.json($0, now: now) })]
                }
            }
        }

        router.post("/api/schedules/{name}/{action}") { _, context in
            let name = try context.parameters.decoded("name")
            let action = try context.parameters.decoded("action")
            guard action == "pause" || action == "resume" else {
                throw Problem(.notFound, "no schedule action '\(action)'; pause or resume")
            }
            let paused = action == "pause"
            // By the schedule clock, as the CLI: resuming skips the times that passed while paused.
            let found = try await services.blocking {
                try services.store.setSchedulePaused(name, paused: paused, at: Int64(try ScheduleClock(store: services.store).now()))
            }
            guard found else { throw Problem(.notFound, "no schedule named \(name)") }
            return JSONResponse.make(["name": .string(name), "paused": .bool(paused)])
        }
    }
}
