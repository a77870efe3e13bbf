#if canImport(Glibc)
import Glibc
#endif
import OrchestratePluginKit

/// Where the data of READ replies goes when the SFTP channel's I/O thread writes it itself (a
/// download's partial file). Called on that thread; a failure is handed to the request's waiter.
protocol ReadSink: AnyObject, Sendable {
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(StepError)
}

/// The SFTP subsystem channel of one connection, shared by any number of threads: each request
/// gets an id, goes into one outgoing queue, and its reply is matched back by that id, so many
/// files can be in flight on one connection (`sftp.accept-paths`' `parallel`, the files of a tree)
/// and one file can have many writes or reads in flight (pipelining).
///
/// It needs only a byte stream (`SSHTransport`: libssh2's channel, or the pipes of an `ssh`
/// child). One I/O thread makes every call on that stream once it is open (libssh2 sessions are
/// not thread-safe); other threads only touch the queues, under `mutex`.
///
/// A caller that gives up waiting (cancel, timeout) abandons its request: a reply that still
/// arrives is dropped by id, and a request not yet sent is never sent, so abandoning never
/// breaks the connection for the others.
///
/// The data of a READ goes straight from the stream to a `ReadSink` (the download's file),
/// written by the I/O thread: no copy into a reply, no hand-over of the bytes between threads.
/// A download's READs are a `ReadStream`, which the I/O thread keeps in flight by itself.
final class SFTPChannel: @unchecked Sendable {
    /// One request and, once it arrived, its reply.
    final class Request: @unchecked Sendable {
        let id: UInt32
        fileprivate var packet: [UInt8]
        fileprivate var sent = 0
        fileprivate var reply: Reply?
        fileprivate var abandoned = false
        /// Set once a thread waits for this reply: only such a reply wakes the waiters.
        fileprivate var awaited = false
        /// A READ's destination: the data is written to `sink` at `offset`, at most `limit` bytes.
        fileprivate var sink: (target: any ReadSink, offset: Int64, limit: Int)?
        /// Set while the I/O thread writes this request's data to its sink.
        fileprivate var sinking = false
        /// The stream this READ belongs to: its reply is handled there, not waited for.
        fileprivate var stream: ReadStream?

        fileprivate init(id: UInt32, packet: [UInt8]) {
            self.id = id
            self.packet = packet
        }
    }

    /// A reply: its packet type and a reader positioned after the request id. For a READ with a
    /// sink, a DATA reply's bytes are already written: `sunk` says how many (the reader is empty),
    /// or `sinkError` why not.
    struct Reply {
        var type: UInt8
        var reader: WireReader
        var sunk = 0
        var sinkError: StepError?
    }

    private let transport: any SSHTransport
    private let host: String
    private let ioTimeout: Double

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let replied = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// A pipe written to wake the I/O thread from poll when a request is queued or we stop.
    private let wakeFD: Int32
    private let wakeWriteFD: Int32
    // Guarded by `mutex`:
    private var queue: [Request?] = []  // taken entries are nil: a sent request is not kept alive here
    private var queueHead = 0
    private var waiting: [UInt32: Request] = [:]
    private var nextID: UInt32 = 16
    private var failure: StepError?
    private var stopping = false
    /// Set while the I/O thread waits other than for room in the stream: only then does a new
    /// request need to wake it (a wait for room takes the queue when it wakes).
    private var ioAsleep = false
    /// Threads waiting for a sink write to finish (abandoning its request): only then does the
    /// end of each write broadcast.
    private var sinkWaiters = 0
    /// Sent packets kept for reuse by big requests (writes): a fresh 255 KiB array per request
    /// costs page faults each (measured: a sixth of the CPU of an upload).
    private var spare: [[UInt8]] = []
    private var thread = pthread_t()
    private var running = false

    /// The reply to INIT (VERSION) carries no request id; it is delivered to this id.
    private static let initialiseID: UInt32 = 1

    init(transport: any SSHTransport, parameters: ConnectionParameters) {
        self.transport = transport
        host = parameters.host
        ioTimeout = Double(parameters.ioTimeout)
        var fds: [Int32] = [-1, -1]
        _ = pipe(&fds)
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        wakeFD = fds[0]
        wakeWriteFD = fds[1]
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        replied.initialize(to: pthread_cond_t())
        pthread_cond_init(replied, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        stop()
        close(wakeFD)
        close(wakeWriteFD)
        pthread_cond_destroy(replied)
        pthread_mutex_destroy(mutex)
        replied.deallocate()
        mutex.deallocate()
    }

    /// Starts the I/O thread and exchanges INIT/VERSION; returns the server's extensions.
    func start(_ step: StepContext?) throws(StepError) -> [String: [UInt8]] {
        running = true
        let box = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { raw in
            let channel = Unmanaged<SFTPChannel>.fromOpaque(raw!).takeRetainedValue()
            channel.run()
            return nil
        }, box)
        var writer = WireWriter(.initialise, id: nil)
        writer.u32(3)
        let request = Request(id: SFTPChannel.initialiseID, packet: writer.finish())
        locked {
            queue.append(request)
            waiting[request.id] = request
        }
        wake()
        var reply = try wait(request, step)
        guard reply.type == SFTP.Packet.version.rawValue, try reply.reader.u32() == 3 else { throw WireReader.malformed }
        var extensions: [String: [UInt8]] = [:]
        while !reply.reader.atEnd {
            let name = try reply.reader.string()
            extensions[name] = try reply.reader.data()
        }
        return extensions
    }

    /// True once the connection failed; every later request fails at once.
    var broken: Bool { locked { failure != nil } }

    // MARK: - Requests (any thread)

    /// Queues a request of `type`; `fill` writes its fields after the id.
    func send(_ type: SFTP.Packet, capacity: Int = 64, _ fill: (inout WireWriter) throws(StepError) -> Void) throws(StepError) -> Request {
        let request: Request
        pthread_mutex_lock(mutex)
        if let failure = failure ?? (stopping ? .retryable("the connection to \(host) is closing", code: "connection_lost") : nil) {
            pthread_mutex_unlock(mutex)
            throw failure
        }
        let id = takeIDLocked()
        let buffer = capacity > 4096 ? spare.popLast() ?? [] : []
        pthread_mutex_unlock(mutex)
        var writer = WireWriter(type, id: id, capacity: capacity, reusing: buffer)
        try fill(&writer)
        request = Request(id: id, packet: writer.finish())
        let (failed, asleep) = locked { () -> (StepError?, Bool) in
            if let failure { return (failure, false) }
            queue.append(request)
            waiting[id] = request
            return (nil, takeAsleepLocked())
        }
        if let failed { throw failed }
        if asleep { wake() }
        return request
    }

    /// Starts reading `[from, to)` of `handle` into `sink`: READs of up to `piece` bytes, up to
    /// `window` bytes ahead of what `advance` released, asked for and written by the I/O thread.
    /// `abandon` it unless it ended.
    func stream(_ handle: [UInt8], from: Int64, to: Int64, window: Int, piece: Int, into sink: any ReadSink) throws(StepError) -> ReadStream {
        let stream = ReadStream(handle: handle, sink: sink, from: from, to: to, window: window, piece: piece)
        let asleep = try locked { () throws(StepError) -> Bool in
            if let failure = failure ?? (stopping ? .retryable("the connection to \(host) is closing", code: "connection_lost") : nil) {
                throw failure
            }
            return askLocked(stream) && takeAsleepLocked()
        }
        if asleep { wake() }
        return stream
    }

    /// Releases `stream`'s window up to `released` (what the caller has accounted for), then
    /// waits until its bytes are written in order up to half a window beyond that (or to its
    /// end). Returns that position, and the reply that stopped the stream, if one did (its
    /// position then stays where it is). Cancelling `step` abandons the stream.
    func advance(_ stream: ReadStream, released: Int64, _ step: StepContext?) throws(StepError) -> (position: Int64, refusal: Reply?) {
        let target = min(stream.end, released + Int64(max(stream.window / 2, 1)))
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if released > stream.released {
            stream.released = released
            // With READs in flight the I/O thread asks for more as each reply lands; with none,
            // nothing would wake it.
            if stream.pending.isEmpty && askLocked(stream) && takeAsleepLocked() { wake() }
        }
        while true {
            if let refusal = stream.refusal { return (stream.position, refusal) }
            let position = stream.position
            if position >= target { return (position, nil) }
            if let failure { throw failure }
            if let step, step.isCancelled {
                abandonLocked(stream)
                throw .cancelled("sftp transfer cancelled")
            }
            stream.wakeAt = target
            timedWaitLocked()
        }
    }

    /// Gives up on `stream`: its READs not sent are dropped, the replies to the others are, and
    /// none of its data is written once this returns.
    func abandon(_ stream: ReadStream) { locked { abandonLocked(stream) } }

    private func abandonLocked(_ stream: ReadStream) {
        stream.abandoned = true
        // `abandonLocked(request)` may wait (the mutex released) for a piece being written; the
        // I/O thread adds no piece meanwhile (`answerLocked` ignores an abandoned stream), and
        // popping re-reads what is pending after each wait.
        while let piece = stream.pending.popLast() { abandonLocked(piece.request) }
    }

    /// Queues the READs `stream`'s window allows; true if it queued any. Called with `mutex` held.
    private func askLocked(_ stream: ReadStream) -> Bool {
        var asked = false
        while let (offset, length) = stream.nextPiece() {
            askLocked(stream, offset, length)
            asked = true
        }
        return asked
    }

    private func askLocked(_ stream: ReadStream, _ offset: Int64, _ length: Int) {
        let id = takeIDLocked()
        var writer = WireWriter(.read, id: id, capacity: stream.handle.count + 32)
        writer.string(stream.handle)
        writer.u64(UInt64(offset))
        writer.u32(UInt32(length))
        let request = Request(id: id, packet: writer.finish())
        request.sink = (stream.sink, offset, length)
        request.stream = stream
        queue.append(request)
        waiting[request.id] = request
        stream.asked(offset, length, request)
    }

    /// A reply to one of `stream`'s READs (not abandoned) arrived: the rest of a short one and
    /// the next pieces are asked for. Called by the I/O thread with `mutex` held.
    private func answerLocked(_ stream: ReadStream, _ request: Request, _ reply: Reply) {
        // Abandoned while this piece was written: ask for nothing more (not even the rest of a
        // short reply), or a READ outside `pending` would write to the file after `abandon`.
        guard !stream.abandoned, let (_, offset, _) = request.sink else { return }
        guard reply.type == SFTP.Packet.data.rawValue && reply.sinkError == nil && reply.sunk > 0 else {
            // The piece stays pending: the in-order position never passes bytes not written
            // (a checkpoint beyond them would resume above a hole).
            if stream.refusal == nil { stream.refusal = reply }
            return
        }
        guard let length = stream.answered(offset) else { return }
        if reply.sunk < length { askLocked(stream, offset + Int64(reply.sunk), length - reply.sunk) }
        _ = askLocked(stream)
    }

    private func takeIDLocked() -> UInt32 {
        defer { nextID = nextID == UInt32.max ? 16 : nextID + 1 }
        return nextID
    }

    /// Whether the I/O thread sleeps in a wait that a new request must interrupt (it then no
    /// longer counts as asleep: one wake-up is enough). Called with `mutex` held.
    private func takeAsleepLocked() -> Bool {
        defer { ioAsleep = false }
        return ioAsleep
    }

    /// Waits on `replied` for at most 0.1 s (a cancel is noticed within that). `mutex` held.
    private func timedWaitLocked() {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        deadline.tv_nsec += 100_000_000
        if deadline.tv_nsec >= 1_000_000_000 { deadline.tv_sec += 1; deadline.tv_nsec -= 1_000_000_000 }
        pthread_cond_timedwait(replied, mutex, &deadline)
    }

    /// Waits for the reply to `request`. Cancelling `step` abandons the request.
    func wait(_ request: Request, _ step: StepContext?) throws(StepError) -> Reply {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        request.awaited = true
        while true {
            if let reply = request.reply { return reply }
            if let failure { throw failure }
            if let step, step.isCancelled {
                abandonLocked(request)
                throw .cancelled("sftp transfer cancelled")
            }
            timedWaitLocked()
        }
    }

    /// Sends `type` and waits for its reply.
    func call(_ type: SFTP.Packet, _ step: StepContext?, capacity: Int = 64, _ fill: (inout WireWriter) throws(StepError) -> Void) throws(StepError) -> Reply {
        try wait(try send(type, capacity: capacity, fill), step)
    }

    /// Gives up on `request`: not sent if it has not started, its reply dropped if it comes.
    func abandon(_ request: Request) { locked { abandonLocked(request) } }

    private func abandonLocked(_ request: Request) {
        request.abandoned = true
        // Once this returns, the request's sink is never written to again, nor held: a reply
        // that comes late (or never) must not keep the download's partial file open.
        sinkWaiters += 1
        while request.sinking { pthread_cond_wait(replied, mutex) }
        sinkWaiters -= 1
        request.sink = nil
        request.stream = nil
        // Still queued means not started (the I/O thread takes a request out before sending it).
        if let index = queue[queueHead...].firstIndex(where: { $0 === request }) {
            queue.remove(at: index)
            waiting[request.id] = nil
        }
    }

    // MARK: - Stopping

    /// Sends what is queued (briefly), then stops the I/O thread. The caller closes the session.
    func stop() {
        let join = locked { () -> Bool in
            defer { stopping = true }
            return running && !stopping
        }
        guard join else { return }
        wake()
        pthread_join(thread, nil)
    }

    // MARK: - The I/O thread

    private func run() {
        // However the thread ends, nobody may wait for it afterwards.
        defer { die(.retryable("the connection to \(host) was closed", code: "connection_lost")) }
        do throws(StepError) { try pump() } catch { die(error) }
    }

    /// Sends queued requests and cuts replies out of the stream until the connection fails or
    /// the channel stops.
    private func pump() throws(StepError) {
        var current: Request?
        var inbox = [UInt8](repeating: 0, count: 1 << 20)  // grows for a bigger packet
        // Received bytes are inbox[consumed ..< filled]; they move to the front only when the
        // free space runs short, not after every receive.
        var consumed = 0, filled = 0
        func compact() {
            guard consumed > 0 else { return }
            inbox.withUnsafeMutableBytes { raw in
                _ = memmove(raw.baseAddress!, raw.baseAddress!.advanced(by: consumed), filled - consumed)
            }
            filled -= consumed
            consumed = 0
        }
        var lastProgress = Connection.now()
        var stopDeadline = Double.infinity
        while true {
            var progressed = false
            var sendBlocked = false  // the send phase stopped because the stream took nothing
            var replies: [(UInt32, Reply)] = []
            while true {
                if current == nil { current = locked { nextToSend() } }
                guard let request = current else { break }
                // (withUnsafeBytes rethrows untyped errors: the send's own comes back as a Result.)
                let n = try request.packet.withUnsafeBytes { raw in
                    Result { () throws(StepError) -> Int in try transport.send(UnsafeRawBufferPointer(rebasing: raw[request.sent...])) }
                }.get()
                if n == 0 { sendBlocked = true; break }
                request.sent += n
                progressed = true
                if request.sent == request.packet.count {
                    let packet = request.packet
                    request.packet = []
                    current = nil
                    if packet.capacity > 4096 { locked { if spare.count < 16 { spare.append(packet) } } }
                }
            }
            while true {
                if inbox.count - filled < 64 << 10 { compact() }
                let n = try inbox.withUnsafeMutableBytes { raw in
                    Result { () throws(StepError) -> Int in try transport.receive(into: UnsafeMutableRawBufferPointer(rebasing: raw[filled...])) }
                }.get()
                if n == 0 { break }
                filled += n
                progressed = true
                // Cut complete packets out of the inbox.
                while filled - consumed >= 4 {
                    let length = Int(UInt32(inbox[consumed]) << 24 | UInt32(inbox[consumed + 1]) << 16
                                     | UInt32(inbox[consumed + 2]) << 8 | UInt32(inbox[consumed + 3]))
                    guard length >= 5, length <= SFTP.maximumPacket else {
                        throw .retryable("\(host) sent an SFTP packet of \(length) bytes", code: "sftp_protocol")
                    }
                    if consumed + 4 + length > inbox.count {
                        compact()
                        if 4 + length > inbox.count { inbox += repeatElement(0, count: 4 + length - inbox.count) }
                    }
                    guard consumed + 4 + length <= filled else { break }
                    replies.append(try cut(inbox, at: consumed + 4, length: length))
                    consumed += 4 + length
                }
                if consumed == filled { consumed = 0; filled = 0 }
            }
            let now = Connection.now()
            let (busy, stop) = locked { () -> (Bool, Bool) in
                // Waiters are woken for a reply one of them waits for, or a stream that is due:
                // not for every READ of a stream, nor for each of the writes an upload waits past.
                var wakeWaiters = false
                for (id, reply) in replies {
                    guard let request = waiting.removeValue(forKey: id) else { continue }
                    if !request.abandoned, let stream = request.stream {
                        answerLocked(stream, request, reply)
                        if stream.due {
                            stream.wakeAt = .max
                            wakeWaiters = true
                        }
                    } else if !request.abandoned {
                        request.reply = reply
                        if request.awaited { wakeWaiters = true }
                    } else if reply.type == SFTP.Packet.handle.rawValue {
                        // An abandoned open succeeded after all: close what it opened (the
                        // reply to that is dropped too: nobody waits for its id).
                        var reader = reply.reader
                        guard let handle = try? reader.data() else { continue }
                        let closeID = takeIDLocked()
                        var writer = WireWriter(.close, id: closeID)
                        writer.string(handle)
                        queue.append(Request(id: closeID, packet: writer.finish()))
                    }
                }
                if wakeWaiters { pthread_cond_broadcast(replied) }
                return (!waiting.isEmpty || current != nil || queueHead < queue.count, stopping)
            }
            if stop {
                // Let queued requests (closes of abandoned files) go out, for at most a second.
                if stopDeadline == .infinity { stopDeadline = now + 1 }
                if !busy || now > stopDeadline { return }
            }
            if progressed || !busy {
                lastProgress = now
                if progressed { continue }
            } else if now - lastProgress > ioTimeout {
                throw StepError(kind: .timeout, code: "io_timeout", message: "no progress from \(host) for \(Int(ioTimeout)) s")
            }
            transport.idle()
            // A request queued after the send phase found none (its sender saw the thread awake
            // and did not wake it) is sent now, not after the poll: libssh2's poll waits for its
            // socket to be readable unless it is blocked writing, and nothing is in flight to
            // answer. Otherwise the thread sleeps, and the next request must wake it, unless the
            // poll waits for room in the stream (it takes the queue when it wakes). Asleep first,
            // so a request queued meanwhile wakes it at worst once for nothing.
            let (sending, queuedLate) = locked { () -> (Bool, Bool) in
                let sending = current != nil || queueHead < queue.count
                if sending && !sendBlocked { return (true, true) }
                ioAsleep = true
                return (sending, false)
            }
            if queuedLate { continue }
            let streamFDs = transport.pollDescriptors(sending: sending)
            if streamFDs.contains(where: { $0.events & Int16(POLLOUT) != 0 }) { locked { ioAsleep = false } }
            var fds = streamFDs + [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, nfds_t(fds.count), stop ? 100 : 1000)
            transport.serviced(Array(fds.prefix(streamFDs.count)))
            if fds[streamFDs.count].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 256)
                while Glibc.read(wakeFD, &drain, drain.count) > 0 {}
            }
        }
    }

    /// The reply in `inbox[start ..< start + length]` (type, then the body). The data of a DATA
    /// reply to a READ with a sink is written to the sink here, straight from the inbox.
    private func cut(_ inbox: [UInt8], at start: Int, length: Int) throws(StepError) -> (UInt32, Reply) {
        let type = inbox[start]
        if type == SFTP.Packet.version.rawValue {
            return (SFTPChannel.initialiseID, Reply(type: type, reader: WireReader(Array(inbox[start + 1 ..< start + length]))))
        }
        guard length >= 5 else { throw WireReader.malformed }
        let id = UInt32(inbox[start + 1]) << 24 | UInt32(inbox[start + 2]) << 16 | UInt32(inbox[start + 3]) << 8 | UInt32(inbox[start + 4])
        if type == SFTP.Packet.data.rawValue, let request = locked({ () -> Request? in
            guard let request = waiting[id], request.sink != nil, !request.abandoned else { return nil }
            request.sinking = true
            return request
        }), let sink = request.sink {
            var reply = Reply(type: type, reader: WireReader([]))
            // uint32 id, string data: the data must fit the packet and what was asked for.
            let available = length - 9
            let count = available < 0 ? -1
                : Int(UInt32(inbox[start + 5]) << 24 | UInt32(inbox[start + 6]) << 16 | UInt32(inbox[start + 7]) << 8 | UInt32(inbox[start + 8]))
            if count < 0 || count > available || count > sink.limit {
                reply.sinkError = WireReader.malformed
            } else {
                do throws(StepError) {
                    try inbox.withUnsafeBytes { raw in
                        Result { () throws(StepError) in try sink.target.write(UnsafeRawBufferPointer(rebasing: raw[start + 9 ..< start + 9 + count]), at: sink.offset) }
                    }.get()
                    reply.sunk = count
                } catch {
                    reply.sinkError = error
                }
            }
            locked {
                request.sinking = false
                if sinkWaiters > 0 { pthread_cond_broadcast(replied) }
            }
            return (id, reply)
        }
        return (id, Reply(type: type, reader: WireReader(Array(inbox[start + 5 ..< start + length]))))
    }

    /// The next request to send (skipping abandoned ones). Called with `mutex` held.
    private func nextToSend() -> Request? {
        while queueHead < queue.count {
            let request = queue[queueHead]
            queue[queueHead] = nil
            queueHead += 1
            if queueHead > 256 && queueHead * 2 > queue.count {
                queue.removeFirst(queueHead)
                queueHead = 0
            }
            if let request, !request.abandoned { return request }
        }
        return nil
    }

    /// Fails every request, now and later, with `error`.
    private func die(_ error: StepError) {
        locked {
            if failure == nil { failure = error }
            waiting.removeAll()
            queue.removeAll()
            queueHead = 0
            pthread_cond_broadcast(replied)
        }
    }

    private func wake() {
        var one: UInt8 = 1
        _ = write(wakeWriteFD, &one, 1)
    }

    private func locked<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
