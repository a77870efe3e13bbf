import Foundation
import OrchestrateEngine
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

/// Executes one run in the foreground, shared by `run` and `resume`: prints progress, turns
/// SIGINT/SIGTERM into a cancellation (a second one exits at once, leaving the run resumable),
/// and maps the outcome to the exit status.
enum RunSession {
    static func execute(run: RunRecord, workflow: Workflow, store: any StateStore, registry: PluginRegistry,
                        maxParallel: Int?, json: Bool, options: EngineOptions) throws -> Never
    {
        var options = options
        if let maxParallel { options.maxParallel = maxParallel }
        let printer = RunPrinter(json: json, runID: run.id)
        let executor: RunExecutor
        do {
            executor = try RunExecutor(store: store, registry: registry, workflow: workflow, run: run,
                                       options: options, observer: printer)
        } catch {
            throw CLIFailure(status: ExitStatus.runFailed, message: "\(error)")
        }
        let signals = SignalRelay(announce: "interrupted: cancelling steps and running compensations (again to exit now)",
                                  beforeExit: { printer.flush(timeout: 1) }) {
            executor.cancel()
        }
        let final = executor.execute()
        printer.summary(final, steps: executor.declaredStepRecords ?? (try? store.steps(ofRun: final.id)) ?? [])
        if final.status == .cancelled && signals.received { ProcessExit.now(ExitStatus.interrupted) }
        switch final.status {
        case .succeeded: ProcessExit.now(ExitStatus.success)
        case .failed, .cancelled: ProcessExit.now(ExitStatus.runFailed)
        default:
            if executor.lostOwnership {
                Terminal.error(final.error ?? "another process took the run over")
                ProcessExit.now(ExitStatus.runFailed)
            }
            // The store failed mid-run: the run is left resumable.
            Terminal.error("\(final.error ?? "the run stopped"); resume it with: orchestrate resume \(final.id)")
            ProcessExit.now(ExitStatus.runFailed)
        }
    }
}

/// SIGINT and SIGTERM: the first one calls `onFirst` (cooperative cancel); the second one
/// exits at once with 130.
final class SignalRelay: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let lock = NSLock()
    private var count = 0

    var received: Bool { lock.withLock { count > 0 } }

    /// `beforeExit` runs before the second signal exits (the printer writes its queued lines).
    init(announce: String, beforeExit: @escaping @Sendable () -> Void = {}, onFirst: @escaping @Sendable () -> Void) {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [self] in
                let n = lock.withLock { count += 1; return count }
                if n == 1 {
                    // Off the handler: a source runs its handler once at a time, so a line that
                    // blocks (a terminal stopped with Ctrl-S) would keep the second signal out.
                    DispatchQueue.global().async {
                        Terminal.line("\n" + announce, to: .standardError)
                        onFirst()
                    }
                } else {
                    // The exit asked for happens within 2 s even if writing the last lines blocks.
                    Thread.detachNewThread {
                        Thread.sleep(forTimeInterval: 2)
                        ProcessExit.immediately(ExitStatus.interrupted)
                    }
                    beforeExit()
                    Terminal.line("interrupted again: exiting now; interrupted runs can be resumed", to: .standardError)
                    ProcessExit.immediately(ExitStatus.interrupted)
                }
            }
            source.resume()
            sources.append(source)
        }
    }
}
