import Hummingbird
import HTTPTypes
import OrchestrateJSON

/// The subset of the Vimeo API the example workflows use, behind bearer-token auth:
/// `GET /me`, `POST /me/videos`, `GET|PATCH|DELETE /videos/{id}`, `DELETE /uploads/{id}/complete`.
enum APIRoutes {
    static func add(to router: Router<SandboxContext>, state: SandboxState) {
        let api = router.group().add(middleware: BearerAuth(state: state))

        api.get("/me") { _, _ in
            let used = await state.used
            return Responses.json([
                "uri": "/users/1", "name": "Sandbox User",
                "upload_quota": ["space": ["free": .int(state.quota - used), "max": .int(state.quota), "used": .int(used)]],
            ])
        }

        api.post("/me/videos") { request, context in
            let body = await request.json(context)
            let approach = body["upload"]?["approach"]?.stringValue ?? "tus"
            guard ["tus", "streaming"].contains(approach) else {
                return Responses.error(.badRequest, "upload.approach must be tus or streaming, not \(approach)")
            }
            guard let size = body["upload"]?["size"]?.intValue, size >= 0 else {
                return Responses.error(.badRequest, "upload.size is required")
            }
            let free = state.quota - (await state.used)
            if size > free { return Responses.error(.forbidden, "not enough upload quota: \(size) bytes asked, \(free) free") }
            let video = await state.createVideo(name: body["name"]?.stringValue ?? "Untitled", approach: approach, size: size,
                                                idempotencyKey: request.headers[.idempotencyKey])
            return Responses.json(video.json(base: await state.base), status: .ok)
        }

        api.get("/videos/{id}") { _, context in
            guard let video = await state.video(try context.parameters.require("id", as: Int.self)), !video.deleted else {
                return Responses.error(.notFound, "no such video")
            }
            return Responses.json(video.json(base: await state.base))
        }

        api.patch("/videos/{id}") { request, context in
            let id = try context.parameters.require("id", as: Int.self)
            let body = await request.json(context)
            guard let current = await state.video(id), !current.deleted else { return Responses.error(.notFound, "no such video") }
            let video = await state.update(id) { video in
                if let name = body["name"]?.stringValue { video.name = name }
                if let description = body["description"]?.stringValue { video.description = description }
            }
            return Responses.json(video!.json(base: await state.base))
        }

        api.delete("/videos/{id}") { _, context in
            let id = try context.parameters.require("id", as: Int.self)
            guard let current = await state.video(id), !current.deleted else { return Responses.error(.notFound, "no such video") }
            _ = await state.update(id) { $0.deleted = true }
            return Responses.empty(.noContent)
        }

        // The streaming flow's "activate": completes the upload, answers 201 + Location.
        api.delete("/uploads/{id}/complete") { _, context in
            let id = try context.parameters.require("id", as: Int.self)
            guard let video = await state.video(id), !video.deleted else { return Responses.error(.notFound, "no such upload") }
            guard video.received == video.size else {
                return Responses.error(.badRequest, "the upload is incomplete: \(video.received) of \(video.size) bytes")
            }
            _ = await state.update(id) { $0.activated = true }
            var headers = HTTPFields()
            headers[.location] = "/videos/\(id)"
            return Responses.empty(.created, headers: headers)
        }
    }
}

/// `Authorization: bearer TOKEN` (scheme case-insensitive), else 401 in Vimeo's shape.
struct BearerAuth: RouterMiddleware {
    let state: SandboxState

    func handle(_ request: Request, context: SandboxContext,
                next: (Request, SandboxContext) async throws -> Response) async throws -> Response
    {
        let value = request.headers[.authorization] ?? ""
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", parts[1] == state.token else {
            return Responses.error(.unauthorized, "a valid bearer token is required")
        }
        return try await next(request, context)
    }
}
