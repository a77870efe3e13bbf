// Helpers for the plugin host tests: fixture plugins built once per test process, a recording
// delegate, and running a blocking step call off the Swift concurrency pool.
import Foundation
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateTestSupport

/// Fixture plugins compiled from Tests/Fixtures/plugins once per process (the loader caches
/// by path, so every test sees the same loaded library).
enum Fixtures {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var built: [String: URL] = [:]
    static let directory = TemporaryDirectory("orchestrate-plugin-fixtures")

    /// The path of `name.so`, built with `flags` (each flag set gets its own file).
    static func path(_ name: String, flags: [String] = []) throws -> String {
        let key = ([name] + flags).joined(separator: " ")
        lock.lock()
        defer { lock.unlock() }
        if let url = built[key] { return url.path }
        let variant = flags.isEmpty ? name : name + "-" + flags.joined().filter { $0.isLetter || $0.isNumber }
        let dir = directory.url.appendingPathComponent(variant)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let url = try CCompiler.buildFixture(name, into: dir, extraFlags: flags)
        built[key] = url
        return url.path
    }

    static func plugin(_ name: String) throws -> LoadedPlugin {
        try PluginLoader.load(path: try path(name))
    }

    static func step(_ id: String, in plugin: String) throws -> StepType {
        guard let step = try Fixtures.plugin(plugin).stepTypes.first(where: { $0.id == id }) else {
            throw TestFailure("no step \(id) in \(plugin)")
        }
        return step
    }

    /// A built-in Swift plugin from the products directory (ORCHESTRATE_BIN_DIR).
    static func builtIn(_ name: String) throws -> LoadedPlugin {
        let url = TestPaths.productsDir.appendingPathComponent("liborchestrate-plugin-\(name).so")
        return try PluginLoader.load(path: url.path)
    }
}

/// Records every callback; hands out queued items. Thread-safe, as the protocol requires.
final class RecordingDelegate: StepHostDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var _logs: [(LogLevel, String)] = []
    private var _progress: [StepProgress] = []
    private var _checkpoints: [[UInt8]] = []
    private var _items: [NextItem] = []
    private var _itemsDone: [(String, String?)] = []
    private var _itemCheckpoints: [(String, [UInt8])] = []
    private var _itemProgress: [(String, Int64, Int64)] = []
    /// What saveCheckpoint answers (true = durable).
    var checkpointsAreDurable = true
    /// Called after each checkpoint is recorded (e.g. to cancel at a given point).
    var onCheckpoint: (@Sendable ([UInt8]) -> Void)?
    /// Called for each log line.
    var onLog: (@Sendable (LogLevel, String) -> Void)?

    func withLock<T>(_ body: () -> T) -> T { lock.lock(); defer { lock.unlock() }; return body() }

    var logs: [(LogLevel, String)] { withLock { _logs } }
    var logText: String { logs.map(\.1).joined(separator: "\n") }
    var progressReports: [StepProgress] { withLock { _progress } }
    var checkpoints: [[UInt8]] { withLock { _checkpoints } }
    var itemsDone: [(String, String?)] { withLock { _itemsDone } }
    var itemCheckpoints: [(String, [UInt8])] { withLock { _itemCheckpoints } }
    var itemProgressReports: [(String, Int64, Int64)] { withLock { _itemProgress } }

    /// Queues what nextItem hands out, in order; `.closed` stays once reached.
    func queue(_ items: [NextItem]) { withLock { _items += items } }

    func log(_ level: LogLevel, _ message: String) {
        withLock { _logs.append((level, message)) }
        onLog?(level, message)
    }

    func progress(_ progress: StepProgress) { withLock { _progress.append(progress) } }

    func saveCheckpoint(_ data: [UInt8]) -> Bool {
        guard checkpointsAreDurable else { return false }
        withLock { _checkpoints.append(data) }
        onCheckpoint?(data)
        return true
    }

    func nextItem(timeout: Duration) -> NextItem {
        let next: NextItem? = withLock {
            guard let first = _items.first else { return nil }
            if case .closed = first { return first }
            return _items.removeFirst()
        }
        if let next { return next }
        Thread.sleep(forTimeInterval: Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        return .timeout
    }

    func itemDone(id: String, error: String?) { withLock { _itemsDone.append((id, error)) } }

    func saveItemCheckpoint(id: String, data: [UInt8]) -> Bool {
        withLock { _itemCheckpoints.append((id, data)) }
        return true
    }

    func itemProgress(id: String, bytesDone: Int64, bytesTotal: Int64) {
        withLock { _itemProgress.append((id, bytesDone, bytesTotal)) }
    }
}

extension StepInvocation {
    /// Runs the (blocking) call on a thread of its own, as the engine must.
    func runOnThread() async -> Result<[String: JSONValue], StepFailure> {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: self.run()) }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Runs the call on a thread of its own and times it there, so a busy Swift concurrency
    /// pool (other tests compiling fixtures) cannot inflate the figure.
    func runTimed() async -> TimedResult {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                let started = ContinuousClock.now
                let result = self.run()
                continuation.resume(returning: TimedResult(result: result, started: started, ended: .now))
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Calls cancel(reason) after `delay`, from a thread of its own (not Dispatch, whose global
    /// queues the concurrency pool shares on Linux).
    func cancel(_ reason: CancelReason, after delay: Duration) {
        Thread {
            Thread.sleep(forTimeInterval: Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)
            self.cancel(reason)
        }.start()
    }
}

/// Builds a request with the usual test values.
func request(_ inputs: JSONValue, runDir: String = NSTemporaryDirectory(), key: String? = nil,
             attempt: Int = 1, timeout: Duration? = nil, checkpoint: [UInt8]? = nil) -> StepRequest
{
    StepRequest(runID: "run-1", stepID: "step-1", inputs: inputs, idempotencyKey: key, runDir: runDir,
                attempt: attempt, timeout: timeout, checkpoint: checkpoint)
}

/// Runs step `id` of fixture `plugin` with `inputs`.
func runFixture(_ id: String, in plugin: String = "teststeps", _ inputs: JSONValue,
                delegate: RecordingDelegate = RecordingDelegate(), configure: (inout StepRequest) -> Void = { _ in })
    async throws -> Result<[String: JSONValue], StepFailure>
{
    var req = request(inputs)
    configure(&req)
    let invocation = StepInvocation(stepType: try Fixtures.step(id, in: plugin), request: req, delegate: delegate)
    return await invocation.runOnThread()
}

extension Result where Failure == StepFailure {
    var outputs: Success? { if case .success(let o) = self { return o }; return nil }
    var failure: StepFailure? { if case .failure(let f) = self { return f }; return nil }
}

/// A result with the times, taken on the thread that ran the call.
struct TimedResult: Sendable {
    let result: Result<[String: JSONValue], StepFailure>
    let started: ContinuousClock.Instant
    let ended: ContinuousClock.Instant
    var took: Duration { ended - started }
}
