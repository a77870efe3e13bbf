// orchestrate-plugin-runner PLUGIN.so STEP_TYPE [--memory-limit BYTES]
//
// Runs one step attempt of a plugin out of the engine's process (`isolation: process`): loads
// the plugin with the same loader, calls it through the same ABI, and forwards every host
// callback to the engine as JSON lines on stdout, reading the engine's answers and `cancel` on
// stdin (see RunnerProtocol in OrchestratePluginHost). If the plugin crashes, only this process
// dies; the engine reports the step as failed.
import Foundation
import OrchestrateJSON
import OrchestratePluginHost

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: orchestrate-plugin-runner PLUGIN.so STEP_TYPE [--memory-limit BYTES]\n".utf8))
    ProcessExit.now(2)
}
if let index = arguments.firstIndex(of: "--memory-limit"), index + 1 < arguments.count, let bytes = rlim_t(arguments[index + 1]) {
    var limit = rlimit(rlim_cur: bytes, rlim_max: bytes)
    setrlimit(Int32(RLIMIT_AS.rawValue), &limit)
}

let channel = RunnerChannel(readFrom: FileHandle.standardInput, writeTo: FileHandle.standardOutput)

func finish(_ result: Result<[String: JSONValue], StepFailure>) -> Never {
    switch result {
    case .success(let outputs): channel.send(["op": "done", "outputs": JSONValue.object(outputs)])
    case .failure(let failure): channel.send(["op": "done", "failure": RunnerProtocol.encode(failure)])
    }
    ProcessExit.now(0)
}

guard let first = channel.receive(), first["op"]?.stringValue == "run", let requestValue = first["request"],
      let request = RunnerProtocol.decodeRequest(requestValue)
else {
    finish(.failure(StepFailure(kind: .permanent, code: "runner_protocol", message: "the runner got no valid run request")))
}

let stepType: StepType
do {
    let plugin = try PluginLoader.load(path: arguments[1])
    guard let type = plugin.stepTypes.first(where: { $0.id == arguments[2] }) else {
        finish(.failure(StepFailure(kind: .permanent, code: "unknown_step_type",
                                    message: "\(arguments[1]) no longer provides \(arguments[2])")))
    }
    stepType = type
} catch {
    finish(.failure(StepFailure(kind: .permanent, code: "plugin_refused", message: "\(error)")))
}

/// Forwards the plugin's callbacks to the engine; those that need an answer wait for its reply.
final class ForwardingDelegate: StepHostDelegate, @unchecked Sendable {
    private let lock = NSCondition()
    private var nextID: Int64 = 0
    private var replies: [Int64: JSONValue] = [:]
    private var engineGone = false

    func log(_ level: LogLevel, _ message: String) {
        channel.send(["op": "log", "level": .int(Int64(level.rawValue)), "message": .string(message)])
    }

    func progress(_ p: StepProgress) {
        channel.send(["op": "progress", "bytes_done": .int(p.bytesDone), "bytes_total": .int(p.bytesTotal),
                      "files_done": .int(p.filesDone), "files_total": .int(p.filesTotal)])
    }

    func saveCheckpoint(_ data: [UInt8]) -> Bool {
        ask(["op": "save_checkpoint", "data": RunnerProtocol.base64(data)])?["ok"]?.boolValue ?? false
    }

    func nextItem(timeout: Duration) -> NextItem {
        let ms = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        guard let reply = ask(["op": "next_item", "timeout_ms": .int(ms)]) else { return .closed }
        if let item = reply["item"], let id = item["id"]?.stringValue, let json = item["json"]?.stringValue {
            return .item(id: id, json: json, checkpoint: RunnerProtocol.bytes(item["checkpoint"]))
        }
        return reply["closed"]?.boolValue == true ? .closed : .timeout
    }

    func itemDone(id: String, error: String?) {
        channel.send(["op": "item_done", "item": .string(id), "error": error.map(JSONValue.string) ?? .null])
    }

    func itemFailed(id: String, failure: StepFailure) {
        channel.send(["op": "item_failed", "item": .string(id), "failure": RunnerProtocol.encode(failure)])
    }

    func saveItemCheckpoint(id: String, data: [UInt8]) -> Bool {
        ask(["op": "save_item_checkpoint", "item": .string(id), "data": RunnerProtocol.base64(data)])?["ok"]?.boolValue ?? false
    }

    func itemProgress(id: String, bytesDone: Int64, bytesTotal: Int64) {
        channel.send(["op": "item_progress", "item": .string(id), "bytes_done": .int(bytesDone), "bytes_total": .int(bytesTotal)])
    }

    /// The engine debits its caps and answers how long to wait (cancellable, here).
    func reserveBandwidth(_ bytes: Int64) -> Int64 {
        ask(["op": "reserve_bandwidth", "bytes": .int(bytes)])?["wait_ns"]?.intValue ?? 0
    }

    /// Sends a request and waits for the engine's reply (nil if the engine went away).
    private func ask(_ message: JSONValue) -> JSONValue? {
        let id: Int64 = lock.withLock {
            nextID += 1
            return nextID
        }
        guard case .object(var object) = message else { return nil }
        object["id"] = .int(id)
        guard channel.send(.object(object)) else { return nil }
        lock.lock()
        defer { lock.unlock() }
        while replies[id] == nil && !engineGone { lock.wait() }
        return replies.removeValue(forKey: id)
    }

    func received(reply: JSONValue) {
        guard let id = reply["id"]?.intValue else { return }
        lock.withLock {
            replies[id] = reply
            lock.broadcast()
        }
    }

    func engineClosed() {
        lock.withLock {
            engineGone = true
            lock.broadcast()
        }
    }
}

/// The engine's bandwidth caps, asked about over the channel.
struct ForwardedBandwidth: BandwidthAccount {
    let delegate: ForwardingDelegate
    func reserve(_ bytes: Int64) -> Int64 { delegate.reserveBandwidth(bytes) }
}

let delegate = ForwardingDelegate()
var runRequest = request
if RunnerProtocol.hasBandwidth(requestValue) { runRequest.bandwidth = ForwardedBandwidth(delegate: delegate) }
let invocation = StepInvocation(stepType: stepType, request: runRequest, delegate: delegate)

// The engine's messages after `run`: replies and cancellation. If the engine goes away, the
// step is cancelled (nobody would read its result).
Thread {
    while let message = channel.receive() {
        switch message["op"]?.stringValue {
        case "reply":
            delegate.received(reply: message)
        case "cancel":
            let reason: CancelReason = message["reason"]?.stringValue == "timeout" ? .timeout
                : message["reason"]?.stringValue == "shutdown" ? .shutdown : .cancelled
            invocation.cancel(reason)
        default:
            break
        }
    }
    delegate.engineClosed()
    invocation.cancel(.shutdown)
}.start()

finish(invocation.run())
