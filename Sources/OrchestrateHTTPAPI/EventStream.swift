import Foundation
import Hummingbird
import HTTPTypes
import OrchestrateJSON
import OrchestrateStore

/// The journal as Server-Sent Events: `GET /api/events` (every run and the queue) and
/// `GET /api/runs/{id}/events`. Each event is `id: SEQ` and `data: {JSON}` (the `events
/// --json` form, whose `type` says what happened). A client resumes after the last seq it saw,
/// from `Last-Event-ID` (what EventSource sends on reconnecting) or `?after=SEQ`; the store
/// guarantees that reading after a seq skips nothing, and reading strictly after it repeats
/// nothing.
enum EventStream {
    /// How often the store is polled when there is nothing new, and how often an idle stream
    /// sends a comment (which also finds clients that went away).
    static let pollInterval: Duration = .milliseconds(200)
    static let keepAliveInterval: Double = 10

    static func add(to router: Router<APIContext>, services: APIServices) {
        router.get("/api/events") { request, context in
            var after = try resumePoint(request)
            // A HEAD is answered, and a stream's slot taken, before the store is read: streams
            // are not counted by the request admission, so they must not cost reads unbounded.
            if context.isHead { return headResponse() }
            try takeSlot(services)
            do {
                if after == fromTheEnd { after = try await services.blocking { try latestSeq(services.store) } }
            } catch {
                services.closeStream()
                throw error
            }
            return stream(StreamCursor(runID: nil, after: after), services: services, context: context)
        }
        router.get("/api/runs/{id}/events") { request, context in
            let id = try context.parameters.runID()
            let after = try resumePoint(request)
            guard after != fromTheEnd else { throw Problem(.badRequest, "after=end is for /api/events; a run's stream starts at its beginning") }
            // `items=live`: the events about one file already journaled are left out (a
            // session's files, up to hundreds of thousands: the run's detail pages them); new
            // ones come.
            let liveItems: Bool
            switch request.uri.queryParameters.get("items") {
            case nil: liveItems = false
            case "live"?: liveItems = true
            case let other?: throw Problem(.badRequest, "items=\(other): the only choice is items=live")
            }
            if !context.isHead { try takeSlot(services) }
            let openedAt: Int64
            do {
                guard try await services.blocking({ try services.store.run(id) }) != nil else { throw Problem(.notFound, "no run \(id)") }
                if context.isHead { return headResponse() }
                openedAt = try await services.blocking { try latestSeq(services.store) }
            } catch {
                if !context.isHead { services.closeStream() }
                throw error
            }
            let cursor = StreamCursor(runID: id, after: after, filesThrough: liveItems ? max(1, openedAt) : 0, visibleAtOpen: openedAt)
            return stream(cursor, services: services, context: context)
        }
    }

    /// Whether `request` asks for an event stream (which `AdmissionMiddleware` does not count).
    static func isStream(_ request: Request) -> Bool { isStream(method: request.method, path: request.uri.path) }

    /// `GET /api/events` or `GET /api/runs/{id}/events` exactly (`path` with or without its query).
    static func isStream(method: HTTPRequest.Method, path: String) -> Bool {
        guard method == .get else { return false }
        let route = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        if route == "/api/events" { return true }
        let parts = route.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 5 && parts[0].isEmpty && parts[1] == "api" && parts[2] == "runs" && !parts[3].isEmpty && parts[4] == "events"
    }

    /// `?after=end` (the stream of everything): only what happens from now on. The dashboard
    /// wants to hear of changes, not to download a journal of months.
    static let fromTheEnd: Int64 = -1

    /// `Last-Event-ID` when it is there (an EventSource reconnecting keeps its first URL, `?after`
    /// included, and sends the last seq it saw), else `?after`. Both are checked: a malformed
    /// one is a 400 even when the other decides.
    static func resumePoint(_ request: Request) throws -> Int64 {
        let after = try request.uri.queryParameters.get("after").map { text in
            text == "end" ? fromTheEnd : try seq(text, from: "after")
        }
        if let header = request.headers[.lastEventID] { return try seq(header, from: "Last-Event-ID") }
        return after ?? 0
    }

    private static func seq(_ text: String, from name: String) throws -> Int64 {
        guard let seq = Int64(text.trimmingCharacters(in: .whitespaces)), seq >= 0 else {
            throw Problem(.badRequest, "\(name) must be an event seq (a non-negative integer), not '\(text)'")
        }
        return seq
    }

    /// The newest event's seq (0 when there is none), by exponential then binary search on
    /// "is there an event after x" (seqs grow but may have gaps): a few dozen indexed reads.
    static func latestSeq(_ store: any StateStore) throws -> Int64 {
        func anyAfter(_ x: Int64) throws -> Bool { try !store.events(runID: nil, afterSeq: x, limit: 1).isEmpty }
        guard try anyAfter(0) else { return 0 }
        var low: Int64 = 0, high: Int64 = 1  // invariant, once found: anyAfter(low) && !anyAfter(high)
        while try anyAfter(high) { low = high; high *= 2 }
        while high - low > 1 {
            let middle = low + (high - low) / 2
            if try anyAfter(middle) { low = middle } else { high = middle }
        }
        return high
    }

    static var streamHeaders: HTTPFields {
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return headers
    }

    /// A HEAD's answer: the stream's headers, no slot taken (its body is never written).
    static func headResponse() -> Response {
        var response = Response(status: .ok, headers: streamHeaders)
        response.headers[.contentLength] = nil  // unknown: it never ends
        return response
    }

    /// Takes one of the `maxStreams` slots, or answers 503.
    static func takeSlot(_ services: APIServices) throws {
        guard services.openStream() else {
            throw Problem(.serviceUnavailable, "too many event streams are open (at most \(services.maxStreams)); retry later", retryAfter: 5)
        }
    }

    /// The stream's response, with its slot already taken (`takeSlot`); it holds the slot until
    /// its client is gone (its connection closes: `ConnectionGuard` closes it as soon as the
    /// client hangs up).
    static func stream(_ start: StreamCursor, services: APIServices, context: APIContext) -> Response {
        let headers = streamHeaders
        let connection = context.connection
        let body = ResponseBody { writer in
            defer { services.closeStream() }
            var cursor = start
            var lastWrite = Date()
            try await writer.write(ByteBuffer(string: "retry: 1000\n\n"))
            if start.last > 0, let notice = try await prunedNotice(after: start.last, services: services) {
                try await writer.write(notice)
            }
            while !Task.isCancelled && connection.isActive {
                let (text, more) = try await cursor.next(services)
                if text.contains(where: { $0.readableBytes > 0 }) {
                    for piece in text where piece.readableBytes > 0 { try await writer.write(piece) }
                    lastWrite = Date()
                } else if Date().timeIntervalSince(lastWrite) >= keepAliveInterval {
                    try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                    lastWrite = Date()
                }
                if more { continue }
                try await Task.sleep(for: pollInterval)
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }
}

extension EventStream {
    /// The answer to a client resuming after a seq below the highest one retention removed:
    /// an `event: pruned` message (no `id:`, so it does not move `Last-Event-ID`) saying that
    /// events of pruned runs after its seq are gone, that each `runs.pruned` event names them,
    /// and that the stream goes on with what remains after its seq. Nil when nothing it could
    /// have missed was pruned.
    static func prunedNotice(after: Int64, services: APIServices) async throws -> ByteBuffer? {
        let through = try await services.blocking { try services.store.prunedThrough() }
        guard after < through else { return nil }
        let data: JSONValue = [
            "type": "journal.pruned", "after": .int(after), "pruned_through": .int(through), "continue_after": .int(after),
            "message": .string("events of finished runs pruned by retention, up to seq \(through), are gone; the runs.pruned events name those runs; what remains follows"),
        ]
        return ByteBuffer(string: "event: pruned\ndata: \(data.jsonText)\n\n")
    }
}

extension HTTPField.Name {
    static let lastEventID = HTTPField.Name("Last-Event-ID")!
}
