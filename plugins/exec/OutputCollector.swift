/// One output stream of the child: split into lines for the log as it arrives, and the last
/// `tailLimit` bytes kept for the step's output (memory stays flat however much is printed).
struct OutputCollector {
    /// Bytes of output kept for the `stdout` / `stderr` outputs.
    static let tailLimit = 64 << 10
    /// A line longer than this is logged in pieces.
    static let maxLine = 16 << 10

    private(set) var tail: [UInt8] = []
    private(set) var totalBytes: Int64 = 0
    private var pendingLine: [UInt8] = []
    private(set) var lastLine = ""

    /// Appends `bytes` and calls `emit` for every complete line.
    mutating func append(_ bytes: UnsafeRawBufferPointer, emit: (String) -> Void) {
        totalBytes += Int64(bytes.count)
        tail.append(contentsOf: bytes)
        if tail.count > 2 * OutputCollector.tailLimit { tail.removeFirst(tail.count - OutputCollector.tailLimit) }
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                flush(emit)
            } else {
                pendingLine.append(byte)
                if pendingLine.count >= OutputCollector.maxLine { flush(emit) }
            }
        }
    }

    /// Emits the unfinished last line, if any (at end of stream).
    mutating func finish(emit: (String) -> Void) {
        if !pendingLine.isEmpty { flush(emit) }
    }

    /// The kept tail as text, starting at a UTF-8 character boundary when it was cut.
    var text: String {
        var bytes = tail.suffix(OutputCollector.tailLimit)
        if isTruncated { while let first = bytes.first, first & 0xC0 == 0x80 { bytes.removeFirst() } }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// True when more was printed than the tail keeps.
    var isTruncated: Bool { totalBytes > Int64(OutputCollector.tailLimit) }

    private mutating func flush(_ emit: (String) -> Void) {
        if pendingLine.last == UInt8(ascii: "\r") { pendingLine.removeLast() }
        let line = String(decoding: pendingLine, as: UTF8.self)
        pendingLine.removeAll(keepingCapacity: true)
        if !line.isEmpty { lastLine = line }
        emit(line)
    }
}
