import Foundation
import OrchestrateExactPath
import OrchestrateJSON
import OrchestrateLock
import OrchestratePluginHost

/// Writing to the terminal: plain lines when not a TTY, colour only on a TTY without NO_COLOR.
enum Terminal {
    enum Stream { case standardOutput, standardError }

    static let stdoutIsTTY = isatty(STDOUT_FILENO) == 1
    static let stderrIsTTY = isatty(STDERR_FILENO) == 1
    static let colorEnabled: Bool = {
        let env = ProcessInfo.processInfo.environment
        return stdoutIsTTY && env["NO_COLOR"].map(\.isEmpty) ?? true && env["TERM"] != "dumb"
    }()

    /// One lock per stream, so lines are never interleaved within a stream, and a stdout that
    /// blocks (a pipe nobody reads, Ctrl-S) cannot hold up stderr: the signal handler's
    /// messages and a second Ctrl-C's exit go through.
    private static let stdoutLock = Lock()
    private static let stderrLock = Lock()

    static func line(_ text: String, to stream: Stream = .standardOutput) {
        write(text + "\n", to: stream)
    }

    static func write(_ text: String, to stream: Stream = .standardOutput) {
        let (lock, descriptor) = stream == .standardOutput ? (stdoutLock, STDOUT_FILENO) : (stderrLock, STDERR_FILENO)
        let failure = lock.withLock { writeAll(Array(text.utf8), to: descriptor) }
        guard failure != 0, stream == .standardOutput, !outlivesItsOutput else { return }
        // A command whose output is what it is for stops at the first line it could not write.
        if failure == EPIPE { ProcessExit.now(ExitStatus.brokenPipe) }
        _ = lock.withLock { writeAll(Array("error: cannot write the output: \(String(cString: strerror(failure)))\n".utf8), to: STDERR_FILENO) }
        ProcessExit.now(ExitStatus.runFailed)
    }

    /// Set by the commands that do work while they print (`serve`, and `run`, `resume`, `retry`,
    /// `copy` and `cancel`, which execute a run in the foreground): they go on when their
    /// output cannot be written, instead of dying with it. A `serve >log 2>&1` on a disk that
    /// fills, or `serve | logger` whose reader died, used to end serve at the next line
    /// (FileHandle.write traps on any error; SIGPIPE killed it) and every run in flight with it;
    /// a lost log line is the lesser harm. The other commands end quietly on a closed stdout
    /// (`orchestrate list | head`, `events --follow | grep -m1`), as SIGPIPE would end them.
    nonisolated(unsafe) private(set) static var outlivesItsOutput = false

    /// Makes this process outlive its output (see `outlivesItsOutput`). Writes to a pipe whose
    /// reader is gone then fail with EPIPE instead of raising SIGPIPE, which also keeps the
    /// process alive when an isolated plugin runner dies while the host writes to it.
    static func outliveOutput() {
        signal(SIGPIPE, SIG_IGN)
        outlivesItsOutput = true
    }

    /// write(2) until every byte is out: 0, or the errno that stopped it (EINTR is retried).
    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Int32 {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += n
        }
        return 0
    }

    /// One line of a log (`serve`'s output and messages): file names and messages in it may
    /// come from anyone who can write a watched folder, so its control characters are escaped
    /// (C0 with the newline, DEL, C1, the bidirectional overrides, as `PathBytes.quoted` does):
    /// a name holding "\n12:00:00 …" cannot forge a line, nor an ESC sequence drive the terminal.
    static func logLine(_ text: String, to stream: Stream = .standardOutput) {
        line(escapingControls(text), to: stream)
    }

    static func escapingControls(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: PathBytes.isEscapedWhenShown) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if PathBytes.isEscapedWhenShown(scalar) { out += "\\u{\(String(scalar.value, radix: 16))}" } else { out.unicodeScalars.append(scalar) }
        }
        return out
    }

    /// A document from the store or a server made fit for a human's terminal: every string in it
    /// (keys too) with its control characters escaped as `escapingControls` does. Error messages,
    /// log lines, file names and labels come from servers, plugins and whoever submitted the run;
    /// `--json` output keeps them exact (JSON escapes them itself).
    static func shown(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string(let text): return .string(escapingControls(text))
        case .array(let values): return .array(values.map(shown))
        case .object(let fields):
            return .object(Dictionary(fields.map { (escapingControls($0.key), shown($0.value)) }, uniquingKeysWith: { first, _ in first }))
        default: return value
        }
    }

    static func error(_ message: String) { line("error: \(message)", to: .standardError) }
    static func warning(_ message: String) { line("warning: \(message)", to: .standardError) }

    enum Style: String {
        case bold = "1", dim = "2", red = "31", green = "32", yellow = "33", blue = "34", cyan = "36"
    }

    static func styled(_ text: String, _ style: Style) -> String {
        colorEnabled ? "\u{1B}[\(style.rawValue)m\(text)\u{1B}[0m" : text
    }
}

/// "1 step", "3 steps": a count and its noun, singular for one.
func counted(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }
