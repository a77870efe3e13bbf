import Foundation
import HTTPTypes
import HummingbirdCore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTPTypes

/// How many connections the API holds and how long each may take, against clients that open
/// sockets and wait (`serve --http-max-connections`, `--http-head-timeout`, ...).
public struct ConnectionLimits: Sendable {
    /// Connections open at once. Past it, a new connection closes the one that has waited
    /// longest without a request in progress (a slow head or an idle keep-alive connection); if
    /// every connection is working on a request, the new one is closed.
    public var maxConnections = 512
    /// Seconds from the connection's first byte (or its opening) to the end of the request head.
    public var headTimeout = 10.0
    /// Seconds from the end of the head to the end of the body (at most `APIContext.maxBodySize`).
    public var bodyTimeout = 60.0
    /// Seconds a keep-alive connection may wait with no request in progress, and a client may
    /// leave its answer unread (the connection's writes stalled, an event stream's too).
    public var idleTimeout = 60.0

    public init() {}

    /// `requested`, but at most half the process's descriptor limit (RLIMIT_NOFILE): the other
    /// half stays for the runs' files, sockets and pipes and for the store.
    public static func connectionCap(requested: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return requested }
        return max(1, min(requested, Int(limit.rlim_cur / 2)))
    }
}

/// Every open API connection, oldest first, with whether it may be closed to make room (no
/// request of it in progress). Shared by the connections of every event loop.
final class ConnectionTable: Sendable {
    let capacity: Int
    private struct Entry {
        let channel: any Channel
        var evictable: Bool
    }
    private struct State {
        var next = 0
        var entries: [Int: Entry] = [:]
    }
    private let state = NIOLockedValueBox(State())

    init(capacity: Int) { self.capacity = capacity }

    /// Registers `channel`; at capacity, closes the oldest evictable connection to make room.
    /// nil when the table is full of connections at work: the caller closes `channel`.
    func admit(_ channel: any Channel) -> Int? {
        var victim: (any Channel)?
        let id = state.withLockedValue { state -> Int? in
            if state.entries.count >= capacity {
                guard let oldest = state.entries.filter(\.value.evictable).keys.min() else { return nil }
                victim = state.entries.removeValue(forKey: oldest)?.channel
            }
            state.next += 1
            state.entries[state.next] = Entry(channel: channel, evictable: true)
            return state.next
        }
        victim?.close(promise: nil)
        return id
    }

    func setEvictable(_ id: Int, _ evictable: Bool) {
        state.withLockedValue { $0.entries[id]?.evictable = evictable }
    }

    func remove(_ id: Int) { _ = state.withLockedValue { $0.entries.removeValue(forKey: id) } }
}

/// The hard bound on accepted sockets, on the listening socket: `ConnectionTable` makes room at
/// its capacity by closing a connection, which takes a moment; meanwhile at most `slack` more
/// are accepted, then accepting pauses (new connections wait in the kernel's backlog) until
/// closes catch up. So descriptors stay bounded however fast clients connect.
struct AcceptedSocketBound: AvailableConnectionsDelegate {
    let limit: Int
    private var open = 0

    static let slack = 16

    init(capacity: Int) { limit = capacity + Self.slack }

    mutating func connectionOpened() { open += 1 }
    mutating func connectionClosed() { open -= 1 }
    func isAcceptingNewConnections() -> Bool { open < limit }
}

/// One connection's deadlines and its place in the `ConnectionTable`, in its pipeline after the
/// HTTP decoder. Phases: waiting for a head (head deadline, from the first byte), reading a body
/// (body deadline), working on a request (none: an event stream lasts), idle between requests
/// (idle deadline). A missed deadline closes the connection.
///
/// A client that closes its side while its event stream is answered is gone: the connection
/// is closed at once, so the stream ends and frees its slot. A client that stops reading is
/// closed once no written byte has left for the idle deadline: it would hold its connection,
/// and a stream its slot, for ever. Progress, not writability, is what counts: the bytes waiting
/// may stay below NIO's high-water mark (the server waiting on a response it cannot finish), and
/// a kernel buffer that grows now and then flips writability back and forth, which used to
/// restart the deadline each time.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private enum Phase { case awaitingHead, readingBody, working, idle }

    private let table: ConnectionTable
    private let limits: ConnectionLimits
    private var id: Int?
    private var phase = Phase.awaitingHead
    /// Requests whose response has not ended yet.
    private var unanswered = 0
    private var streaming = false
    private var deadline: Scheduled<Void>?
    /// Looks once a second, while bytes wait to be written, whether any left since the last look.
    private var writeWatch: Scheduled<Void>?
    /// Writes completed so far, and at the last look; the bytes waiting at the last look.
    private var writesDone = 0
    private var writesDoneSeen = 0
    private var bytesWaitingSeen = 0
    private var lastWriteProgress = NIODeadline.now()
    /// The sending side is shut after an early answer: what arrives now is dropped.
    private var lingering = false

    init(table: ConnectionTable, limits: ConnectionLimits) {
        self.table = table
        self.limits = limits
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard let id = table.admit(context.channel) else {
            context.close(promise: nil)
            return
        }
        self.id = id
        let table = self.table
        context.channel.closeFuture.whenComplete { _ in table.remove(id) }
        // Bytes as they arrive, before decoding: the first byte of a request starts its head
        // deadline (until then an idle connection is only idle).
        let firstByte = FirstByteWatcher { [weak self] in self?.bytesArrived(context: context) }
        try? context.pipeline.syncOperations.addHandler(firstByte, position: .first)
        arm(limits.headTimeout, context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        writeWatch?.cancel()
    }

    /// Starts looking at the bytes waiting to be written, unless already looking.
    private func watchWrites(context: ChannelHandlerContext) {
        guard writeWatch == nil else { return }
        lastWriteProgress = .now()
        writesDoneSeen = writesDone
        bytesWaitingSeen = Self.bytesWaiting(context)
        scheduleLook(context: context)
    }

    /// This guard and its context, for closures NIO runs later on the channel's event loop.
    private struct LoopBound {
        weak var owner: ConnectionGuard?
        let context: ChannelHandlerContext
    }

    private func onLoop(_ context: ChannelHandlerContext) -> NIOLoopBound<LoopBound> {
        NIOLoopBound(LoopBound(owner: self, context: context), eventLoop: context.eventLoop)
    }

    private func scheduleLook(context: ChannelHandlerContext) {
        let bound = onLoop(context)
        writeWatch = context.eventLoop.scheduleTask(in: .seconds(1)) { bound.value.owner?.lookAtWrites(context: bound.value.context) }
    }

    /// Progress when a write completed or fewer bytes wait than at the last look; none for the
    /// idle deadline while bytes wait: the client stopped reading, and is closed.
    private func lookAtWrites(context: ChannelHandlerContext) {
        writeWatch = nil
        let waiting = Self.bytesWaiting(context)
        guard waiting > 0 else { return }  // all written: looked at again with the next write
        let now = NIODeadline.now()
        if writesDone != writesDoneSeen || waiting < bytesWaitingSeen { lastWriteProgress = now }
        if now - lastWriteProgress >= Self.amount(limits.idleTimeout) {
            Self.reset(context.channel)
            return
        }
        writesDoneSeen = writesDone
        bytesWaitingSeen = waiting
        scheduleLook(context: context)
    }

    private static func bytesWaiting(_ context: ChannelHandlerContext) -> Int {
        (try? context.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) ?? 0
    }

    private func bytesArrived(context: ChannelHandlerContext) {
        guard phase == .idle else { return }
        phase = .awaitingHead
        setEvictable(true)
        arm(limits.headTimeout, context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if lingering { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            unanswered += 1
            streaming = EventStream.isStream(method: head.method, path: head.path ?? "")
            phase = .readingBody
            setEvictable(false)
            arm(limits.bodyTimeout, context: context)
        case .body:
            break
        case .end:
            settle(context: context)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var answeredEarly = false
        if case .end = unwrapOutboundIn(data) {
            unanswered = max(0, unanswered - 1)
            if phase == .working { settle(context: context) }
            // A response that ends before its request did (a 401 or 413 sent while the body
            // still arrives): the connection closes once it is written. Kept open, it waited
            // for a body nobody would read, and could not be closed to make room: anyone
            // without a token could fill every place with heads announcing a body and lock
            // every client out.
            answeredEarly = phase == .readingBody
        }
        let done = promise ?? context.eventLoop.makePromise()
        let bound = onLoop(context)
        let closeAfter = answeredEarly
        done.futureResult.hop(to: context.eventLoop).whenComplete { _ in
            bound.value.owner?.writesDone += 1
            if closeAfter { bound.value.owner?.closeLingering(context: bound.value.context) }
        }
        context.write(data, promise: done)
        watchWrites(context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event, lingering || streaming && unanswered > 0 {
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// After an answer sent before its request's body arrived: the sending side is shut (the
    /// client sees the answer end), what still comes is read and dropped for at most 2 s, then
    /// the connection closes, as nginx's lingering close does. Closed at once, the bytes still
    /// arriving made the kernel reset the connection, and the client could lose the 401 or 413
    /// it was being told. Until then the connection may be closed to make room.
    private func closeLingering(context: ChannelHandlerContext) {
        lingering = true
        setEvictable(true)
        deadline?.cancel()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
        context.close(mode: .output, promise: nil)
    }

    /// A request is complete: working while a response is due, else idle.
    private func settle(context: ChannelHandlerContext) {
        if unanswered > 0 {
            phase = .working
            deadline?.cancel()
            deadline = nil
        } else {
            phase = .idle
            streaming = false
            setEvictable(true)
            arm(limits.idleTimeout, context: context, abortive: false)
        }
    }

    private func setEvictable(_ evictable: Bool) {
        if let id { table.setEvictable(id, evictable) }
    }

    /// Closes the connection after `seconds` unless re-armed: abortively for a head or a body
    /// that did not come, plainly for a keep-alive connection left idle (its last answer may
    /// still be on its way to a slow client: a reset would cut it).
    private func arm(_ seconds: Double, context: ChannelHandlerContext, abortive: Bool = true) {
        deadline?.cancel()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: Self.amount(seconds)) {
            if abortive { Self.reset(channel) } else { channel.close(promise: nil) }
        }
    }

    /// Closes a connection abortively (RST), as nginx's `reset_timedout_connection` does: a
    /// plain close queues its FIN behind the bytes the client has not taken, so a client that
    /// stopped reading never hears of it, and the kernel keeps the socket and its unsent buffers
    /// for minutes after the descriptor is gone.
    static func reset(_ channel: any Channel) {
        guard let sockets = channel as? any SocketOptionProvider else { return channel.close(promise: nil) }
        sockets.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
    }

    private static func amount(_ seconds: Double) -> TimeAmount { .nanoseconds(Int64(seconds * 1e9)) }
}

/// Tells its owner when bytes arrive on the connection (first in the pipeline).
private final class FirstByteWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let arrived: () -> Void

    init(_ arrived: @escaping () -> Void) { self.arrived = arrived }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        arrived()
        context.fireChannelRead(data)
    }
}
