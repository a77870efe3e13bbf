import Foundation
import OrchestrateJSON

/// The conversation between the host and `orchestrate-plugin-runner`, the small process that runs
/// a plugin out of process (`isolation: process`): one JSON object per line over the runner's
/// stdin (host → runner) and stdout (runner → host). Binary data (checkpoints) is base64.
///
/// Host → runner: `run` (once, first), `cancel`, and `reply` to the runner's requests.
/// Runner → host: `log`, `progress`, `item_done`, `item_failed`, `item_progress` (no reply); `save_checkpoint`,
/// `next_item`, `save_item_checkpoint`, `reserve_bandwidth` (each with an `id`, answered by a
/// `reply` with that id);
/// and `done` (once, last) with the outputs or the failure.
public enum RunnerProtocol {
    public static func encode(_ request: StepRequest) -> JSONValue {
        var o: [String: JSONValue] = [
            "run_id": .string(request.runID), "step_id": .string(request.stepID), "inputs": request.inputs,
            "run_dir": .string(request.runDir), "attempt": .int(Int64(request.attempt)),
        ]
        if let key = request.idempotencyKey { o["idempotency_key"] = .string(key) }
        if request.isLastAttempt { o["last_attempt"] = true }
        if let timeout = request.timeout { o["timeout_ms"] = .int(milliseconds(timeout)) }
        if let checkpoint = request.checkpoint { o["checkpoint"] = .string(Data(checkpoint).base64EncodedString()) }
        // The caps stay in the engine (they are shared with its other steps); the runner asks
        // for bytes with `reserve_bandwidth`.
        if request.bandwidth != nil { o["bandwidth"] = true }
        return .object(o)
    }

    public static func decodeRequest(_ v: JSONValue) -> StepRequest? {
        guard let runID = v["run_id"]?.stringValue, let stepID = v["step_id"]?.stringValue, let inputs = v["inputs"],
              let runDir = v["run_dir"]?.stringValue
        else { return nil }
        var request = StepRequest(runID: runID, stepID: stepID, inputs: inputs, idempotencyKey: v["idempotency_key"]?.stringValue,
                                  runDir: runDir, attempt: Int(v["attempt"]?.intValue ?? 1),
                                  timeout: v["timeout_ms"]?.intValue.map { .milliseconds($0) },
                                  checkpoint: bytes(v["checkpoint"]))
        request.isLastAttempt = v["last_attempt"]?.boolValue == true
        return request
    }

    /// True when the request has bandwidth caps the runner must ask the engine about.
    public static func hasBandwidth(_ v: JSONValue) -> Bool { v["bandwidth"]?.boolValue == true }

    public static func encode(_ failure: StepFailure) -> JSONValue {
        var o: [String: JSONValue] = ["kind": .string(failure.kind.rawValue), "message": .string(failure.message)]
        if let code = failure.code { o["code"] = .string(code) }
        if let after = failure.retryAfter {
            o["retry_after_ms"] = .int(milliseconds(after))
        }
        return .object(o)
    }

    public static func decodeFailure(_ v: JSONValue) -> StepFailure {
        StepFailure(kind: ErrorKind(rawValue: v["kind"]?.stringValue ?? "") ?? .permanent, code: v["code"]?.stringValue,
                    message: v["message"]?.stringValue ?? "the plugin failed", retryAfter: v["retry_after_ms"]?.intValue.map { .milliseconds($0) })
    }

    public static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    public static func bytes(_ value: JSONValue?) -> [UInt8]? {
        value?.stringValue.flatMap { Data(base64Encoded: $0) }.map { [UInt8]($0) }
    }

    public static func base64(_ bytes: [UInt8]) -> JSONValue { .string(Data(bytes).base64EncodedString()) }
}

/// Reads and writes the protocol's lines on a pair of file descriptors. Writes are serialised;
/// reading is done by one thread.
public final class RunnerChannel: @unchecked Sendable {
    private let input: FileHandle
    private let output: FileHandle
    private let writeLock = NSLock()
    private var buffer = Data()

    public init(readFrom input: FileHandle, writeTo output: FileHandle) {
        self.input = input
        self.output = output
    }

    /// Sends one message; false if the other side is gone.
    @discardableResult
    public func send(_ message: JSONValue) -> Bool {
        var line = Data(message.jsonText.utf8)
        line.append(0x0A)
        return writeLock.withLock {
            (try? output.write(contentsOf: line)) != nil
        }
    }

    /// The next message, or nil at end of stream.
    public func receive() -> JSONValue? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = buffer[buffer.startIndex..<newline]
                buffer.removeSubrange(buffer.startIndex...newline)
                if let value = try? JSONValue(parsing: [UInt8](line)) { return value }
                continue
            }
            // A plain read(2): FileHandle.read(upToCount:) waits for the whole count.
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let n = chunk.withUnsafeMutableBytes { read(input.fileDescriptor, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }
}
