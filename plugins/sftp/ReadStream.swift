/// The READs of one download range `[start, end)` of an open remote file, kept in flight by the
/// SFTP channel's I/O thread (`SFTPChannel.stream`): each DATA reply is written to `sink` as it
/// arrives, and the same thread at once asks for the next piece (or for the rest of a short
/// reply). The thread that downloads wakes once per half window of bytes written in order, not
/// for every reply: asking for each next piece itself cost two thread hand-overs per 255 KiB
/// (its wake-up, and its request waking the I/O thread), the most context switches of a download.
///
/// Every field is guarded by the channel's mutex.
final class ReadStream: @unchecked Sendable {
    let handle: [UInt8]
    let sink: any ReadSink
    let end: Int64
    /// Bytes asked for beyond `released`.
    let window: Int
    /// The largest READ (the server's limit).
    let piece: Int

    /// READs are asked for up to `released + window`. The downloading thread releases what it
    /// has accounted for (progress, checkpoint, the rate cap's wait), so a capped range holds its
    /// stream back; the bytes written beyond the in-order position stay within a window and a
    /// piece (what `FileTransfer.holeMargin` counts on).
    var released: Int64
    /// Where the next READ starts.
    var next: Int64
    /// READs in flight, by offset (ascending: the rest of a short reply keeps its piece's place).
    var pending: [(offset: Int64, length: Int, request: SFTPChannel.Request)] = []
    /// The first reply that was not the data asked for (a status such as EOF, an empty or
    /// oversized DATA, a failed write to the sink): the stream asks for nothing more, its piece
    /// stays pending (so `position` stops below it), and the downloading thread says why.
    var refusal: SFTPChannel.Reply?
    /// The downloading thread sleeps until `position` reaches this.
    var wakeAt = Int64.max
    var abandoned = false

    init(handle: [UInt8], sink: any ReadSink, from start: Int64, to end: Int64, window: Int, piece: Int) {
        self.handle = handle
        self.sink = sink
        self.end = end
        self.window = window
        self.piece = piece
        released = start
        next = start
    }

    /// Every byte below this is written to the sink.
    var position: Int64 { pending.first?.offset ?? next }

    /// Whether the downloading thread has something to see: the in-order position reached what
    /// it waits for, or the stream stopped.
    var due: Bool { position >= wakeAt || refusal != nil }

    /// The next READ to ask for, if the window allows one (it is then counted as in flight).
    func nextPiece() -> (offset: Int64, length: Int)? {
        guard !abandoned, refusal == nil, next < end, next < released + Int64(window) else { return nil }
        let length = Int(min(Int64(piece), end - next))
        defer { next += Int64(length) }
        return (next, length)
    }

    /// Records the READ just sent for `[offset, offset + length)`, in offset order.
    func asked(_ offset: Int64, _ length: Int, _ request: SFTPChannel.Request) {
        let index = pending.firstIndex { $0.offset > offset } ?? pending.count
        pending.insert((offset, length, request), at: index)
    }

    /// The READ at `offset` was answered; returns its length.
    func answered(_ offset: Int64) -> Int? {
        guard let index = pending.firstIndex(where: { $0.offset == offset }) else { return nil }
        return pending.remove(at: index).length
    }
}
