#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateLock
import COrchestratePlugin
import OrchestrateJSON

/// The state of one `run` call, behind the opaque `orc_host *` the plugin receives.
///
/// The callbacks in `HostAPITable` find it with `CallContext.resolve`, which only answers for
/// calls still running: a plugin thread that calls back after `run` returned (a contract
/// violation) is ignored instead of touching freed memory, with one warning naming the step
/// type (`DeadHostCalls`).
///
/// Memory handed to the plugin (the loaded checkpoint, items) is malloc'd here and freed when
/// the header says its lifetime ends, and at the latest in `finish()`.
final class CallContext: @unchecked Sendable {
    /// What set_error recorded.
    struct ReportedError {
        var kind: Int32
        var code: String?
        var message: String?
        var retryAfterMs: Int64
    }

    /// Largest checkpoint accepted, as the header states.
    static let checkpointLimit = 1 << 20

    let stepType: String
    let request: StepRequest
    let delegate: any StepHostDelegate
    let signal: CancelSignal

    private let lock = Lock()
    private var finished = false
    private var outputs: [String: JSONValue] = [:]
    private var reportedError: ReportedError?
    private var checkpoint: [UInt8]?
    /// Saves numbered as they arrive, and the number of the one `checkpoint` holds: threads of a
    /// step saving at once are answered in any order (the host writes the newest of those
    /// waiting once for all), and the cache must keep the newest, as the store does.
    private var checkpointSavesArrived = 0
    private var checkpointHeld = 0
    private var checkpointBuffer: UnsafeMutableRawPointer?
    private var itemMemory: [String: [UnsafeMutableRawPointer]] = [:]

    init(stepType: String, request: StepRequest, delegate: any StepHostDelegate, signal: CancelSignal) {
        self.stepType = stepType
        self.request = request
        self.delegate = delegate
        self.signal = signal
        self.checkpoint = request.checkpoint
    }

    // MARK: - Live calls

    private static let liveLock = Lock()
    nonisolated(unsafe) private static var live: [UInt: CallContext] = [:]
    nonisolated(unsafe) private static var lastHandle: UInt = 0
    /// This call's `orc_host *`, once begun.
    private var handle: UInt = 0

    /// Registers the context as running and returns the opaque pointer for the plugin. The
    /// pointer is a number never handed out before, not the context's address: a plugin thread
    /// calling back late must not reach a newer call that happens to reuse the freed memory.
    func begin() -> OpaquePointer {
        let handle = CallContext.liveLock.withLock {
            CallContext.lastHandle += 1
            CallContext.live[CallContext.lastHandle] = self
            return CallContext.lastHandle
        }
        self.handle = handle
        return OpaquePointer(bitPattern: handle)!
    }

    /// Unregisters the context, frees what the plugin was lent, and returns the results.
    func finish() -> (outputs: [String: JSONValue], error: ReportedError?) {
        CallContext.liveLock.withLock { _ = CallContext.live.removeValue(forKey: handle) }
        DeadHostCalls.ended(handle, stepType: stepType)
        return lock.withLock {
            finished = true
            free(checkpointBuffer)
            checkpointBuffer = nil
            for blocks in itemMemory.values { blocks.forEach { free($0) } }
            itemMemory = [:]
            return (outputs, reportedError)
        }
    }

    /// The running call behind `host`, or nil when `host` is not (or no longer) a running call;
    /// `function` (the host function called) names the misbehaviour in the warning.
    static func resolve(_ host: OpaquePointer?, _ function: StaticString) -> CallContext? {
        guard let host else { return nil }
        let handle = UInt(bitPattern: host)
        let context = liveLock.withLock { live[handle] }
        if context == nil { DeadHostCalls.calledAfterReturn(handle, function: "\(function)") }
        return context
    }

    // MARK: - Callbacks (each called by the matching HostAPITable entry)

    func log(_ level: Int32, _ message: String) {
        let level = LogLevel(rawValue: min(max(level, 0), 3)) ?? .info
        // "\r\n" is one Character in Swift, hence the two separators.
        var lines = message.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
        if lines.count > 1, lines.last?.isEmpty == true { lines.removeLast() }
        for line in lines { delegate.log(level, String(line)) }
    }

    func setOutput(name: String, json: String) -> Bool {
        guard !name.isEmpty, let value = try? JSONValue(parsing: json) else { return false }
        return lock.withLock {
            guard !finished else { return false }
            outputs[name] = value
            return true
        }
    }

    func setError(_ error: ReportedError) {
        lock.withLock { if !finished { reportedError = error } }
    }

    func saveCheckpoint(_ data: [UInt8]) -> Bool {
        guard data.count <= CallContext.checkpointLimit, !isFinished else { return false }
        let number = lock.withLock { checkpointSavesArrived += 1; return checkpointSavesArrived }
        guard delegate.saveCheckpoint(data) else { return false }
        lock.withLock {
            guard number > checkpointHeld else { return }
            checkpointHeld = number
            checkpoint = data
            free(checkpointBuffer)
            checkpointBuffer = nil
        }
        return true
    }

    /// A malloc'd copy of the current checkpoint, valid until the next save/load or finish.
    func loadCheckpoint() -> (UnsafeRawPointer?, Int) {
        lock.withLock {
            free(checkpointBuffer)
            checkpointBuffer = nil
            guard !finished, let checkpoint else { return (nil, 0) }
            let buffer = malloc(max(checkpoint.count, 1))!
            checkpoint.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            checkpointBuffer = buffer
            return (UnsafeRawPointer(buffer), checkpoint.count)
        }
    }

    /// Waits for the next item in slices of at most 100 ms, giving up early on cancellation.
    func nextItem(timeoutMs: Int64) -> NextItem {
        let deadline = MonotonicClock.nowMilliseconds() + max(0, timeoutMs)
        while !signal.isCancelled && !isFinished {
            let remaining = max(0, deadline - MonotonicClock.nowMilliseconds())
            switch delegate.nextItem(timeout: .milliseconds(min(remaining, 100))) {
            case .timeout:
                if remaining <= 100 { return .timeout }
            case let other:
                return other
            }
        }
        return .timeout
    }

    /// Copies an item's strings and checkpoint into malloc'd blocks owned until item_done.
    func lend(id: String, json: String, checkpoint: [UInt8]?)
        -> (id: UnsafePointer<CChar>, json: UnsafePointer<CChar>, checkpoint: UnsafePointer<UInt8>?, size: Int)
    {
        let cID = strdup(id)!, cJSON = strdup(json)!
        var blocks: [UnsafeMutableRawPointer] = [UnsafeMutableRawPointer(cID), UnsafeMutableRawPointer(cJSON)]
        var bytes: UnsafeMutablePointer<UInt8>?
        if let checkpoint, !checkpoint.isEmpty {
            let block = malloc(checkpoint.count)!
            checkpoint.withUnsafeBytes { block.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            blocks.append(block)
            bytes = block.assumingMemoryBound(to: UInt8.self)
        }
        lock.withLock { itemMemory[id, default: []] += blocks }
        return (UnsafePointer(cID), UnsafePointer(cJSON), bytes.map { UnsafePointer($0) }, checkpoint?.count ?? 0)
    }

    func itemDone(id: String, error: String?) {
        guard !isFinished else { return }
        delegate.itemDone(id: id, error: error)
        lock.withLock {
            itemMemory.removeValue(forKey: id)?.forEach { free($0) }
        }
    }

    /// `orchestrate.item-failure.v1`: like `itemDone` with an error, the kind deciding what next.
    func itemFailed(id: String, failure: StepFailure) {
        guard !isFinished else { return }
        delegate.itemFailed(id: id, failure: failure)
        lock.withLock {
            itemMemory.removeValue(forKey: id)?.forEach { free($0) }
        }
    }

    /// Accounts `bytes` against the request's bandwidth caps and waits (cancellably) until
    /// they may move. Returns true when cancelled while waiting.
    func consumeBandwidth(_ bytes: Int64) -> Bool {
        guard let account = request.bandwidth, bytes > 0 else { return signal.isCancelled }
        let wait = account.reserve(bytes)
        guard wait > 0 else { return signal.isCancelled }
        // poll() counts milliseconds: round up; the bucket refunds an oversleep on the next call.
        return signal.wait(milliseconds: (wait + 999_999) / 1_000_000)
    }

    var isFinished: Bool { lock.withLock { finished } }
}
