import Hummingbird
import HTTPTypes
import OrchestrateJSON

/// The upload links: tus 1.0.0 (`HEAD`, `PATCH`, termination `DELETE`, creation `POST /tus`,
/// which answers HEAD and PATCH with 405 as tusd does) and
/// Vimeo streaming (`PUT` with `Content-Range`, `bytes */*` verify → 308 + `Range`). Upload
/// links need no token (Vimeo's are pre-signed).
enum UploadRoutes {
    static func add(to router: Router<SandboxContext>, state: SandboxState) {
        router.head("/upload/{id}") { _, context in
            guard let video = await state.video(try context.parameters.require("id", as: Int.self)), !video.deleted else {
                return Responses.empty(.notFound, headers: tusHeaders())
            }
            var headers = tusHeaders()
            headers[.uploadOffset] = "\(video.received)"
            headers[.uploadLength] = "\(video.size)"
            headers[.cacheControl] = "no-store"
            return Responses.empty(.ok, headers: headers)
        }

        router.patch("/upload/{id}") { request, context in
            let id = try context.parameters.require("id", as: Int.self)
            guard request.headers[.tusResumable] == "1.0.0" else { return Responses.error(.preconditionFailed, "Tus-Resumable: 1.0.0 required") }
            guard request.headers[.contentType] == "application/offset+octet-stream" else {
                return Responses.error(.unsupportedMediaType, "Content-Type must be application/offset+octet-stream")
            }
            guard let video = await state.video(id), !video.deleted else { return Responses.empty(.notFound, headers: tusHeaders()) }
            guard let offset = request.headers[.uploadOffset].flatMap({ Int64($0) }), offset == video.received else {
                var headers = tusHeaders()
                headers[.uploadOffset] = "\(video.received)"
                return Responses.error(.conflict, "Upload-Offset does not match the server's \(video.received)", headers: headers)
            }
            if let code = await state.beforeTransfer() { return Responses.injected(code, retryAfter: await state.retryAfterHeader) }
            let written = try await BodyReceiver.receive(request, context, state: state, videoID: id, at: offset, limit: video.size - offset)
            var headers = tusHeaders()
            headers[.uploadOffset] = "\(offset + written)"
            return Responses.empty(.noContent, headers: headers)
        }

        router.delete("/upload/{id}") { _, context in
            let id = try context.parameters.require("id", as: Int.self)
            guard await state.update(id, { $0.deleted = true }) != nil else { return Responses.empty(.notFound, headers: tusHeaders()) }
            return Responses.empty(.noContent, headers: tusHeaders())
        }

        // The creation endpoint is not an upload: like tusd, it refuses the upload methods.
        for method in [HTTPRequest.Method.head, .patch] {
            router.on("/tus", method: method) { _, _ in
                var headers = tusHeaders()
                headers[.allow] = "POST, OPTIONS"
                return Responses.empty(.methodNotAllowed, headers: headers)
            }
        }

        // tus creation: a video of approach tus, its upload link in Location.
        router.post("/tus") { request, _ in
            guard let length = request.headers[.uploadLength].flatMap({ Int64($0) }), length >= 0 else {
                return Responses.error(.badRequest, "Upload-Length required")
            }
            let video = await state.createVideo(name: "tus upload", approach: "tus", size: length,
                                                idempotencyKey: request.headers[.idempotencyKey])
            var headers = tusHeaders()
            headers[.location] = "/upload/\(video.id)"
            return Responses.empty(.created, headers: headers)
        }

        router.put("/upload/{id}") { request, context in
            let id = try context.parameters.require("id", as: Int.self)
            guard let video = await state.video(id), !video.deleted else { return Responses.error(.notFound, "no such upload") }
            let range = request.headers[.contentRange] ?? ""
            if range.replacingSpaces == "bytes*/*" {
                return incomplete(video)  // the verify call
            }
            var start: Int64 = 0
            if let parsed = parseContentRange(range) {
                guard parsed.total == video.size else { return Responses.error(.badRequest, "Content-Range total \(parsed.total) is not the video's size \(video.size)") }
                guard parsed.start <= video.received else {
                    return Responses.error(.rangeNotSatisfiable, "Content-Range starts at \(parsed.start) but only \(video.received) bytes were received")
                }
                start = parsed.start
            }
            if let code = await state.beforeTransfer() { return Responses.injected(code, retryAfter: await state.retryAfterHeader) }
            _ = await state.update(id) { $0.received = min($0.received, start) }
            _ = try await BodyReceiver.receive(request, context, state: state, videoID: id, at: start, limit: video.size - start)
            let after = await state.video(id)!
            return after.received == after.size ? Responses.empty(.ok) : incomplete(after)
        }
    }

    /// 308 Resume Incomplete with the received range (none when nothing arrived yet).
    static func incomplete(_ video: Video) -> Response {
        var headers = HTTPFields()
        if video.received > 0 { headers[.range] = "bytes=0-\(video.received - 1)" }
        return Responses.empty(HTTPResponse.Status(code: 308, reasonPhrase: "Resume Incomplete"), headers: headers)
    }

    static func tusHeaders() -> HTTPFields {
        var headers = HTTPFields()
        headers[.tusResumable] = "1.0.0"
        return headers
    }

    /// `bytes START-END/TOTAL`.
    static func parseContentRange(_ value: String) -> (start: Int64, end: Int64, total: Int64)? {
        let text = value.replacingSpaces
        guard text.hasPrefix("bytes"), let dash = text.firstIndex(of: "-"), let slash = text.firstIndex(of: "/") else { return nil }
        guard let start = Int64(text[text.index(text.startIndex, offsetBy: 5)..<dash]),
              let end = Int64(text[text.index(after: dash)..<slash]),
              let total = Int64(text[text.index(after: slash)...]) else { return nil }
        return (start, end, total)
    }
}

extension String {
    var replacingSpaces: String { String(filter { $0 != " " }) }
}
