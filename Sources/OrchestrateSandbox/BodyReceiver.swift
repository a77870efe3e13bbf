#if canImport(Glibc)
import Glibc
#endif
import Hummingbird
import HTTPTypes
import NIOCore

/// Streams an upload body into a video's file at an offset, counting every byte, applying the
/// drop and stall faults, and recording the new offset even when the client vanishes mid-body
/// (tus keeps the bytes of an interrupted PATCH).
enum BodyReceiver {
    struct Dropped: Error {}

    /// Returns the bytes written. Throws when the client disconnected or a drop was injected;
    /// the offset is recorded in both cases.
    static func receive(_ request: Request, _ context: SandboxContext, state: SandboxState, videoID: Int,
                        at start: Int64, limit: Int64) async throws -> Int64
    {
        let fd = open(await state.path(videoID), O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw HTTPError(.internalServerError, message: "cannot open the video's file") }
        defer { close(fd) }
        var written: Int64 = 0
        var seen: Int64 = 0
        var recordedSeen: Int64 = 0
        var lastRecord: Int64 = 0
        /// Publishes the offset and the byte count (live, so tests and `/_sandbox/state` see an
        /// upload progress, and a client killed mid-body leaves its bytes counted).
        func record() async {
            let delta = seen - recordedSeen
            recordedSeen = seen
            lastRecord = written
            _ = await state.update(videoID) { [written] video in
                video.received = min(video.size, start + written)
                video.bytesReceivedTotal += delta
            }
        }
        do {
            for try await buffer in request.body {
                var count = Int64(buffer.readableBytes)
                var drop = false
                if let allowed = await state.allowance(count) {
                    count = allowed
                    drop = true
                }
                let room = max(0, limit - written)
                let keep = Int(min(count, room))
                let ok = buffer.withUnsafeReadableBytes { bytes -> Bool in
                    var done = 0
                    while done < keep {
                        let n = pwrite(fd, bytes.baseAddress! + done, keep - done, off_t(start + written + Int64(done)))
                        if n <= 0 { return false }
                        done += n
                    }
                    return true
                }
                guard ok else { throw HTTPError(.internalServerError, message: "cannot write the upload") }
                let previous = seen
                written += Int64(keep)
                seen += count
                if drop {
                    await record()
                    context.channel.close(mode: .all, promise: nil)
                    throw Dropped()
                }
                if written - lastRecord >= 1 << 20 { await record() }
                if let pause = await state.shouldStall(done: seen, previous: previous) {
                    try await Task.sleep(for: .milliseconds(pause))
                }
            }
        } catch {
            await record()
            throw error
        }
        await record()
        return written
    }
}
