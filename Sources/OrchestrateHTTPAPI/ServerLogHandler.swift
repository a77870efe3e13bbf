import Foundation
import Logging

/// The log handler of the HTTP server's logger: what it logs (warnings and errors) goes to
/// stderr as one line with its metadata, but metadata is kept as given and formatted only when
/// a line is written. Hummingbird sets a request id on its logger for every request, and
/// swift-log's `StreamLogHandler` formats its whole metadata again at every set: work paid at
/// every request for lines that are almost never written.
struct ServerLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let fields = all.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        let line = "\(ISO8601DateFormatter().string(from: Date())) \(event.level) \(label):\(fields) \(event.message)\n"
        // write(2), errors dropped: FileHandle.write traps on one (a full disk under
        // `serve 2>log`), and a log line is not worth the server.
        var bytes = Array(line.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            bytes = bytes.dropFirst(n)
        }
    }
}
