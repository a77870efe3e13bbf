import OrchestratePluginKit

/// Vimeo's streaming ("resumable PUT") upload: one PUT with `Content-Range: bytes S-E/T` from
/// the offset the server confirmed; `PUT Content-Range: bytes */*` asks the server how much it
/// has (308 + `Range: bytes=0-N`). Verified before a resume and after the body is sent.
struct VimeoStreamingUpload {
    let upload: Upload
    private var step: StepContext { upload.step }

    func run() throws(StepError) -> Upload.Result {
        let size = upload.size
        let resuming = step.loadCheckpointJSON() != nil || step.attempt > 1
        var offset: Int64 = resuming ? try verify() : 0
        let resumedFrom = offset
        if offset > 0 { step.log(.info, "vimeo-streaming: the server has \(offset) of \(size) bytes; continuing from there") }
        var rounds = 0
        var status = 200
        while offset < size || size == 0 {
            rounds += 1
            if rounds > 5 { throw .retryable("vimeo-streaming: the server keeps losing bytes (\(offset) of \(size))", code: "upload_incomplete") }
            try step.checkCancellation()
            let response = try upload.send("PUT", upload.url, headers: [
                "Content-Range": size == 0 ? "bytes */0" : "bytes \(offset)-\(size - 1)/\(size)",
                "Content-Type": "video/mp4",
            ], offset: offset, length: size - offset, emptyBody: size == 0, freshConnection: true)
            status = response.status
            guard [200, 201, 204, 308].contains(response.status) else {
                if response.status == 404 || response.status == 410 { throw expired(response) }
                throw HTTPErrors.status(response, method: "PUT", url: upload.url)
            }
            offset = try verify()
            if size == 0 { break }
        }
        return Upload.Result(status: status, resumedFrom: resumedFrom)
    }

    /// The offset the server holds, from `PUT Content-Range: bytes */*` → 308 `Range: bytes=0-N`.
    private func verify() throws(StepError) -> Int64 {
        let response = try upload.send("PUT", upload.url, headers: ["Content-Range": "bytes */*"], emptyBody: true)
        switch response.status {
        case 308:
            var offset: Int64 = 0
            if let range = response.header("range"), let dash = range.lastIndex(of: "-"), let end = Int64(range[range.index(after: dash)...]) {
                offset = end + 1
            }
            guard offset <= upload.size else {
                throw .permanent("vimeo-streaming: the server claims bytes 0-\(offset - 1) of a \(upload.size)-byte file", code: "upload_protocol")
            }
            step.saveCheckpoint(json: ["offset": .int(offset), "size": .int(upload.size)])
            return offset
        case 200, 201:
            step.saveCheckpoint(json: ["offset": .int(upload.size), "size": .int(upload.size)])
            return upload.size
        case 404, 410:
            throw expired(response)
        default:
            throw HTTPErrors.status(response, method: "PUT (verify)", url: upload.url)
        }
    }

    private func expired(_ response: Transfer.Response) -> StepError {
        .permanent("vimeo-streaming: the upload link \(upload.url) has expired or is unknown (HTTP \(response.status))", code: "upload_expired")
    }
}
