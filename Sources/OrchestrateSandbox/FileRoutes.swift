#if canImport(Glibc)
import Glibc
#endif
import Hummingbird
import HTTPTypes
import NIOCore

/// `GET /files/{name}`: files from `DATA/files`, with a strong ETag, Last-Modified, Range and
/// If-Range, and the fault injector on the body, so downloads can be tested through drops.
enum FileRoutes {
    static func add(to router: Router<SandboxContext>, state: SandboxState) {
        router.get("/files/{name}") { request, context in
            let name = try context.parameters.require("name")
            guard !name.contains("/"), !name.hasPrefix(".") else { return Responses.error(.badRequest, "bad file name") }
            let path = "\(state.dataDir)/files/\(name)"
            var st = stat()
            guard stat(path, &st) == 0 else { return Responses.error(.notFound, "no such file") }
            if let code = await state.beforeTransfer() { return Responses.injected(code, retryAfter: await state.retryAfterHeader) }
            let size = Int64(st.st_size)
            let etag = "\"\(size)-\(st.st_mtim.tv_sec)-\(st.st_mtim.tv_nsec)\""
            let lastModified = HTTPDate.format(st.st_mtim.tv_sec)
            var headers = HTTPFields()
            headers[.eTag] = etag
            headers[.lastModified] = lastModified
            headers[.acceptRanges] = "bytes"
            headers[.contentType] = "application/octet-stream"

            var start: Int64 = 0
            var end = size - 1
            var partial = false
            if let range = request.headers[.range], range.hasPrefix("bytes="),
               request.headers[.ifRange].map({ $0 == etag || $0 == lastModified }) ?? true
            {
                let spec = range.dropFirst(6)
                if let dash = spec.firstIndex(of: "-"), let s = Int64(spec[..<dash]) {
                    if s >= size {
                        headers[.contentRange] = "bytes */\(size)"
                        return Responses.empty(.rangeNotSatisfiable, headers: headers)
                    }
                    start = s
                    if let e = Int64(spec[spec.index(after: dash)...]) { end = min(e, size - 1) }
                    partial = true
                }
            }
            if partial { headers[.contentRange] = "bytes \(start)-\(end)/\(size)" }
            let length = end - start + 1
            let (first, last) = (start, end)
            let channel = context.channel
            let body = ResponseBody(contentLength: Int(length)) { writer in
                let fd = open(path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { throw HTTPError(.internalServerError) }
                defer { close(fd) }
                var offset = first
                var sent: Int64 = 0
                let allocator = ByteBufferAllocator()
                while offset <= last {
                    var count = Int(min(256 * 1024, last - offset + 1))
                    var drop = false
                    if let allowed = await state.allowance(Int64(count)) { count = Int(allowed); drop = true }
                    var buffer = allocator.buffer(capacity: max(count, 1))
                    let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: max(count, 1)) { raw in
                        max(0, pread(fd, raw.baseAddress!, count, off_t(offset)))
                    }
                    if n > 0 { try await writer.write(buffer) }
                    if drop {
                        channel.close(mode: .all, promise: nil)
                        throw BodyReceiver.Dropped()
                    }
                    if n <= 0 { break }
                    let previous = sent
                    offset += Int64(n)
                    sent += Int64(n)
                    if let pause = await state.shouldStall(done: sent, previous: previous) {
                        try await Task.sleep(for: .milliseconds(pause))
                    }
                }
                try await writer.finish(nil)
            }
            return Response(status: partial ? .partialContent : .ok, headers: headers, body: body)
        }
    }
}
