#if canImport(Glibc)
import Glibc
#endif
import OrchestrateJSON

/// One video, as the sandbox knows it. The uploaded bytes live in `DATA/videos/<id>.bin`.
struct Video: Sendable {
    let id: Int
    var name: String
    var description = ""
    let approach: String
    let size: Int64
    /// Bytes stored (the upload offset).
    var received: Int64 = 0
    /// Every body byte the server read for this video, re-sent ones included (tests compare it
    /// with the size to show how much a resume re-sent).
    var bytesReceivedTotal: Int64 = 0
    var activated = false
    var deleted = false
    var idempotencyKey: String?
    /// `POST /me/videos` requests that named this video's idempotency key (1 unless a client
    /// repeated its create, e.g. after a crash; the crash campaign reports it).
    var createRequests = 1

    var status: String {
        if deleted { return "deleted" }
        if received < size || (approach == "streaming" && !activated) { return "uploading" }
        return "available"
    }

    func json(base: String) -> JSONValue {
        var upload: [String: JSONValue] = [
            "approach": .string(approach), "size": .int(size),
            "status": .string(received >= size ? "complete" : "in_progress"),
            "upload_link": .string("\(base)/upload/\(id)"),
        ]
        if approach == "streaming" { upload["complete_uri"] = .string("/uploads/\(id)/complete") }
        return ["uri": .string("/videos/\(id)"), "name": .string(name), "description": .string(description),
                "link": .string("\(base)/videos/\(id)"), "status": .string(status), "upload": .object(upload),
                "received": .int(received), "bytes_received_total": .int(bytesReceivedTotal),
                "deleted": .bool(deleted), "activated": .bool(activated),
                "idempotency_key": idempotencyKey.map { .string($0) } ?? .null, "create_requests": .int(Int64(createRequests))]
    }
}

/// Everything the sandbox holds: videos, the upload quota, and the fault injector. An actor, so
/// concurrent requests see consistent offsets.
actor SandboxState {
    let dataDir: String
    let token: String
    let quota: Int64
    var base = "http://127.0.0.1"
    private var videos: [Int: Video] = [:]
    private var nextID = 1001
    var faults = FaultState()

    init(dataDir: String, token: String, quota: Int64, faults: Faults) {
        self.dataDir = dataDir
        self.token = token
        self.quota = quota
        mkdir(dataDir, 0o755)
        mkdir("\(dataDir)/videos", 0o755)
        mkdir("\(dataDir)/files", 0o755)
        self.faults.reset(faults)
    }

    func setBase(_ url: String) { base = url }

    var used: Int64 { videos.values.filter { !$0.deleted }.reduce(0) { $0 + $1.size } }

    func createVideo(name: String, approach: String, size: Int64, idempotencyKey: String?) -> Video {
        if let key = idempotencyKey, var existing = videos.values.first(where: { $0.idempotencyKey == key }) {
            existing.createRequests += 1
            videos[existing.id] = existing
            return existing
        }
        let video = Video(id: nextID, name: name, approach: approach, size: size, idempotencyKey: idempotencyKey)
        nextID += 1
        videos[video.id] = video
        let fd = open(path(video.id), O_CREAT | O_TRUNC | O_WRONLY, 0o644)
        if fd >= 0 { close(fd) }
        return video
    }

    func video(_ id: Int) -> Video? { videos[id] }

    func update(_ id: Int, _ change: (inout Video) -> Void) -> Video? {
        guard var video = videos[id] else { return nil }
        change(&video)
        videos[id] = video
        return video
    }

    func path(_ id: Int) -> String { "\(dataDir)/videos/\(id).bin" }

    func allVideos() -> [Video] { videos.values.sorted { $0.id < $1.id } }

    // Fault injector access (the injector's state is part of this actor).
    func beforeTransfer() -> Int? { faults.beforeRequest() }
    func allowance(_ count: Int64) -> Int64? { faults.allowance(count) }
    func shouldStall(done: Int64, previous: Int64) -> Int? {
        faults.shouldStall(done: done, previous: previous) ? faults.faults.stallMilliseconds : nil
    }
    func setFaults(_ new: Faults) { faults.reset(new) }
    var retryAfterHeader: String {
        if !faults.faults.retryAfterAsDate { return "\(faults.faults.retryAfter)" }
        return HTTPDate.format(time(nil) + faults.faults.retryAfter)
    }
}
