import Foundation
import OrchestrateJSON
import OrchestrateLock

/// Something that runs one step attempt: a plugin call in this process (`StepInvocation`) or in
/// a runner process (`IsolatedStepInvocation`). `run()` blocks; `cancel` may come from any thread.
public protocol StepRunning: AnyObject, Sendable {
    func run() -> Result<[String: JSONValue], StepFailure>
    func cancel(_ reason: CancelReason)
}

extension StepInvocation: StepRunning {}

/// Runs a step in `orchestrate-plugin-runner`, a child process that loads the plugin and calls it
/// through the same ABI, forwarding every host callback over its stdin/stdout
/// (`RunnerProtocol`). A plugin that crashes, aborts, leaks past `memoryLimit` or ignores
/// cancellation then fails its step — retryable, code `plugin_crashed` (a workflow can list the
/// code in `non_retryable`) — and the engine carries on.
///
/// ```swift
/// let attempt = IsolatedStepInvocation(stepType: type, request: request, delegate: delegate,
///                                      runnerPath: "/usr/lib/orchestrate/orchestrate-plugin-runner")
/// let result = attempt.run()
/// ```
public final class IsolatedStepInvocation: StepRunning, @unchecked Sendable {
    public let stepType: StepType
    public let request: StepRequest
    private let delegate: any StepHostDelegate
    private let runnerPath: String
    private let memoryLimit: Int64?
    /// How long a cancelled runner has to finish before it is killed.
    private let killGrace: Double

    private let lock = Lock()
    private var process: Process?
    private var channel: RunnerChannel?
    private var cancelReason: CancelReason?
    private var finished = false

    public init(stepType: StepType, request: StepRequest, delegate: any StepHostDelegate, runnerPath: String,
                memoryLimit: Int64? = nil, killGrace: Double = 5)
    {
        self.stepType = stepType
        self.request = request
        self.delegate = delegate
        self.runnerPath = runnerPath
        self.memoryLimit = memoryLimit
        self.killGrace = killGrace
    }

    public func run() -> Result<[String: JSONValue], StepFailure> {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: runnerPath)
        child.arguments = [stepType.pluginPath, stepType.id] + (memoryLimit.map { ["--memory-limit", String($0)] } ?? [])
        // A crash is reported as one line (the signal); the Swift runtime's multi-page backtrace
        // of the runner would only bury it in the step's log.
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        child.environment = environment
        let toRunner = Pipe(), fromRunner = Pipe(), errors = Pipe()
        child.standardInput = toRunner
        child.standardOutput = fromRunner
        child.standardError = errors
        do {
            try child.run()
        } catch {
            return .failure(StepFailure(kind: .permanent, code: "runner_missing",
                                        message: "cannot start the plugin runner \(runnerPath): \(error)"))
        }
        let channel = RunnerChannel(readFrom: fromRunner.fileHandleForReading, writeTo: toRunner.fileHandleForWriting)
        let alreadyCancelled: CancelReason? = lock.withLock {
            process = child
            self.channel = channel
            return cancelReason
        }
        forwardStandardError(errors.fileHandleForReading)
        channel.send(["op": "run", "request": RunnerProtocol.encode(request)])
        if let alreadyCancelled { sendCancel(alreadyCancelled) }

        var outcome: Result<[String: JSONValue], StepFailure>?
        while outcome == nil, let message = channel.receive() {
            outcome = handle(message, channel)
        }
        try? toRunner.fileHandleForWriting.close()
        child.waitUntilExit()
        lock.withLock { finished = true }
        return outcome ?? .failure(died(child))
    }

    public func cancel(_ reason: CancelReason) {
        let running: Bool = lock.withLock {
            if cancelReason == nil { cancelReason = reason }
            return process != nil && !finished
        }
        if running { sendCancel(reason) }
    }

    // MARK: Messages from the runner

    private func handle(_ message: JSONValue, _ channel: RunnerChannel) -> Result<[String: JSONValue], StepFailure>? {
        switch message["op"]?.stringValue {
        case "log":
            delegate.log(LogLevel(rawValue: Int32(message["level"]?.intValue ?? 1)) ?? .info, message["message"]?.stringValue ?? "")
        case "progress":
            delegate.progress(StepProgress(bytesDone: message["bytes_done"]?.intValue ?? -1, bytesTotal: message["bytes_total"]?.intValue ?? -1,
                                           filesDone: message["files_done"]?.intValue ?? -1, filesTotal: message["files_total"]?.intValue ?? -1))
        case "save_checkpoint":
            let ok = RunnerProtocol.bytes(message["data"]).map(delegate.saveCheckpoint) ?? false
            channel.send(["op": "reply", "id": message["id"] ?? .null, "ok": .bool(ok)])
        case "next_item":
            let timeout = Duration.milliseconds(message["timeout_ms"]?.intValue ?? 1000)
            var reply: [String: JSONValue] = ["op": "reply", "id": message["id"] ?? .null]
            switch delegate.nextItem(timeout: timeout) {
            case .item(let id, let json, let checkpoint):
                reply["item"] = ["id": .string(id), "json": .string(json), "checkpoint": checkpoint.map(RunnerProtocol.base64) ?? .null]
            case .timeout: reply["timeout"] = true
            case .closed: reply["closed"] = true
            }
            channel.send(.object(reply))
        case "item_done":
            delegate.itemDone(id: message["item"]?.stringValue ?? "", error: message["error"]?.stringValue)
        case "item_failed":
            delegate.itemFailed(id: message["item"]?.stringValue ?? "", failure: RunnerProtocol.decodeFailure(message["failure"] ?? [:]))
        case "save_item_checkpoint":
            let ok = RunnerProtocol.bytes(message["data"]).map { delegate.saveItemCheckpoint(id: message["item"]?.stringValue ?? "", data: $0) } ?? false
            channel.send(["op": "reply", "id": message["id"] ?? .null, "ok": .bool(ok)])
        case "reserve_bandwidth":
            let wait = request.bandwidth?.reserve(message["bytes"]?.intValue ?? 0) ?? 0
            channel.send(["op": "reply", "id": message["id"] ?? .null, "wait_ns": .int(wait)])
        case "item_progress":
            delegate.itemProgress(id: message["item"]?.stringValue ?? "", bytesDone: message["bytes_done"]?.intValue ?? -1,
                                  bytesTotal: message["bytes_total"]?.intValue ?? -1)
        case "done":
            if let failure = message["failure"] { return .failure(RunnerProtocol.decodeFailure(failure)) }
            return .success(message["outputs"]?.objectValue ?? [:])
        default:
            break
        }
        return nil
    }

    // MARK: Cancellation and death

    /// Asks the runner to cancel; kills it if it has not finished within the grace period (a
    /// plugin that ignores cancellation cannot hold a step forever).
    private func sendCancel(_ reason: CancelReason) {
        let name: String
        switch reason {
        case .cancelled: name = "cancelled"
        case .timeout: name = "timeout"
        case .shutdown: name = "shutdown"
        }
        let (channel, child) = lock.withLock { (self.channel, process) }
        channel?.send(["op": "cancel", "reason": .string(name)])
        let grace = killGrace
        DispatchQueue.global().asyncAfter(deadline: .now() + grace) { [weak self] in
            guard let self, let child, child.isRunning, !self.lock.withLock({ self.finished }) else { return }
            kill(child.processIdentifier, SIGKILL)
        }
    }

    /// Why the runner ended without a result.
    private func died(_ child: Process) -> StepFailure {
        let reason = lock.withLock { cancelReason }
        if child.terminationReason == .uncaughtSignal {
            let signal = child.terminationStatus
            if signal == SIGKILL, let reason {
                return StepFailure(kind: reason == .timeout ? .timeout : .cancelled, code: "killed",
                                   message: "the plugin did not stop within \(Int(killGrace))s of being cancelled; its process was killed")
            }
            let name = String(cString: strsignal(signal))
            return StepFailure(kind: .retryable, code: "plugin_crashed",
                               message: "the plugin process of \(stepType.id) died of signal \(signal) (\(name))")
        }
        return StepFailure(kind: .retryable, code: "plugin_crashed",
                           message: "the plugin process of \(stepType.id) exited with status \(child.terminationStatus) before finishing the step")
    }

    /// The runner's stderr (the plugin's own prints, allocator complaints) goes to the step's log.
    private func forwardStandardError(_ handle: FileHandle) {
        let delegate = self.delegate
        Thread {
            var pending = Data()
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                pending.append(contentsOf: chunk[0..<n])
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    if !line.isEmpty { delegate.log(.warn, "[plugin stderr] \(line)") }
                }
            }
        }.start()
    }
}
