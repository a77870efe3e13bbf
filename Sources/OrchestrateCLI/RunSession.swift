import Foundation
import OrchestrateEngine
import OrchestrateLock
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

/// Executes one run in the foreground, shared by `run`, `resume`, `retry` and `cancel` (of a
/// run whose process is gone): prints progress, turns the first SIGINT/SIGTERM into an
/// interrupt that leaves the run resumable (its steps stop and will start again from their
/// checkpoints; nothing is undone) and prints the commands to continue or undo it; a second
/// one exits at once. Maps the outcome to the exit status.
enum RunSession {
    /// Why the run is executed here: to run it (`run`, `resume`, `retry`), or to undo it
    /// (`cancel`), which succeeds when the run ends cancelled with every compensation done.
    enum Purpose { case run, cancel }

    static func execute(run: RunRecord, workflow: Workflow, store: any StateStore, registry: PluginRegistry,
                        maxParallel: Int?, global: GlobalOptions, options: EngineOptions,
                        purpose: Purpose = .run) throws -> Never
    {
        var options = options
        if let maxParallel { options.maxParallel = maxParallel }
        let printer = RunPrinter(json: global.json, runID: run.id)
        let executor: RunExecutor
        do {
            executor = try RunExecutor(store: store, registry: registry, workflow: workflow, run: run,
                                       options: options, observer: printer)
        } catch {
            throw CLIFailure(status: ExitStatus.runFailed, message: "\(error)")
        }
        if purpose == .cancel { executor.cancel() }
        let resumeCommand = NextCommands.command("resume", run.id, global)
        Terminal.outliveOutput()
        let signals = SignalRelay(
            announce: "interrupting: stopping the steps, keeping what they did (again to exit now)",
            second: "interrupted again: exiting now; continue the run with: \(resumeCommand)",
            beforeExit: { printer.flush(timeout: 1) }
        ) {
            executor.interrupt(leaving: .interrupted)
        }
        let final = executor.execute()
        printer.summary(final, steps: executor.declaredStepRecords ?? (try? store.steps(ofRun: final.id)) ?? [])
        if signals.received && !final.status.isFinished && !executor.lostOwnership {
            for line in NextCommands.afterInterrupt(final, global) { Terminal.line(line, to: .standardError) }
            ProcessExit.now(ExitStatus.interrupted)
        }
        switch final.status {
        case .succeeded: ProcessExit.now(ExitStatus.success)
        case .cancelled where purpose == .cancel:
            let failed = ((try? store.steps(ofRun: final.id)) ?? []).contains { $0.kind == .compensation && $0.status == .failed }
            ProcessExit.now(failed ? ExitStatus.runFailed : ExitStatus.success)
        case .failed, .cancelled: ProcessExit.now(ExitStatus.runFailed)
        default:
            if executor.lostOwnership {
                Terminal.error(final.error ?? "another process took the run over")
                ProcessExit.now(ExitStatus.runFailed)
            }
            // The store failed mid-run: the run is left resumable.
            Terminal.error("\(final.error ?? "the run stopped"); resume it with: \(resumeCommand)")
            ProcessExit.now(ExitStatus.runFailed)
        }
    }
}

/// SIGINT and SIGTERM: the first one calls `onFirst` (an interrupt, cooperative); the second
/// one exits at once with 130.
final class SignalRelay: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let lock = Lock()
    private var count = 0

    var received: Bool { lock.withLock { count > 0 } }

    /// `announce` is written at the first signal, `second` at the second; `beforeExit` runs
    /// before the second signal exits (the printer writes its queued lines).
    init(announce: String, second: String = "interrupted again: exiting now; interrupted runs can be resumed",
         beforeExit: @escaping @Sendable () -> Void = {}, onFirst: @escaping @Sendable () -> Void)
    {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [self] in
                let n = lock.withLock { count += 1; return count }
                if n == 1 {
                    // Off the handler: a source runs its handler once at a time, so a line that
                    // blocks (a terminal stopped with Ctrl-S) would keep the second signal out.
                    DispatchQueue.global().async {
                        onFirst()
                        Terminal.line("\n" + announce, to: .standardError)
                    }
                } else {
                    // The exit asked for happens within 2 s even if writing the last lines blocks.
                    Thread.detachNewThread {
                        Thread.sleep(forTimeInterval: 2)
                        ProcessExit.immediately(ExitStatus.interrupted)
                    }
                    beforeExit()
                    Terminal.line(second, to: .standardError)
                    ProcessExit.immediately(ExitStatus.interrupted)
                }
            }
            source.resume()
            sources.append(source)
        }
    }
}
