#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateJSON
import OrchestratePluginKit

/// `exec`: runs a command (argv, never a shell string) and maps its exit to the step's result.
struct Exec: StepDefinition {
    static let id = "exec"
    static let version = "1.0.0"
    static let summary = "Run a command; stream its output to the log; exit status decides success."
    static let documentation = """
        Runs `command` (an argv array; no shell is involved, so nothing needs quoting — use \
        `[sh, -c, "..."]` when you want a shell). The command is looked up in PATH; a command \
        that cannot be found fails as invalid-input.

        Secrets go in `env`, never in `command`: argv is visible to every user of the machine \
        (`ps`), the environment is not. `inherit_env: false` starts from an empty environment.

        stdout lines are logged at info, stderr lines at warn, as they arrive. The last 64 KiB \
        of each are the outputs `stdout` and `stderr`; when stdout is a JSON object or array, it \
        is also output parsed, as `json`.

        Exit status 0 succeeds. Any other status fails as retryable with code `exit_N`, so the \
        step's `retry:` policy applies to a failing command; list the statuses that retrying \
        cannot fix in the policy's `non_retryable` (`retry: { non_retryable: [exit_2] }`). A \
        command killed by a signal fails as retryable (code `signal_N`). When the step is \
        cancelled or times out, the command's process group gets SIGTERM, then SIGKILL after \
        `kill_grace`.

        `retryable_exit_codes` is deprecated: when given, it keeps its old meaning (only the \
        statuses listed are retryable, every other one is permanent).

        If orchestrate dies (kill -9 included), the command and everything it started are killed \
        at once (by orchestrate-exec-guard), and an attempt that runs the step again first ends \
        whatever an earlier attempt left running.
        """
    struct Inputs: StepInputs {
        @Input(help: "the program and its arguments") var command: [String]
        @Input(help: "variables added to the environment (use for secrets)") var env: [String: String] = [:]
        @Input(name: "inherit_env", help: "start from orchestrate's environment") var inheritEnvironment = true
        @Input(help: "working directory") var cwd: String?
        @Input(help: "text written to the command's standard input") var stdin: String?
        @Input(help: "deprecated: every non-zero exit is retryable; list permanent ones in retry.non_retryable (exit_N)",
               deprecated: true) var retryableExitCodes: [Int64]?
        @Input(help: "time between SIGTERM and SIGKILL on cancel (500ms, 5s, 1m)") var killGrace = "5s"
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "the exit status (absent when killed by a signal)", minimum: 0) var exitCode: Int?
        @Output(help: "the signal that ended the command, if one did", minimum: 1) var signal: Int?
        @Output(help: "the last 64 KiB of standard output") var stdout: String
        @Output(help: "the last 64 KiB of standard error") var stderr: String
        @Output(help: "standard output parsed, when it is a JSON object or array", schema: ["type": ["object", "array"]]) var json: JSONValue?
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let command = inputs.command
        guard let program = command.first else { throw StepError.invalidInput("command must not be empty") }
        let (extraEnvironment, inheritEnvironment, cwd, stdinText) = (inputs.env, inputs.inheritEnvironment, inputs.cwd, inputs.stdin)
        let retryableCodes = inputs.retryableExitCodes.map(Set.init)
        if retryableCodes != nil {
            step.log(.warn, "retryable_exit_codes is deprecated: every non-zero exit is retryable now; "
                + "list the permanent ones in the step's retry: { non_retryable: [exit_N] } instead")
        }
        let grace = try parseDuration(inputs.killGrace, input: inputs.$killGrace.name)

        if let cwd {
            var info = stat()
            guard stat(cwd, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
                throw StepError.invalidInput("cwd \(cwd) is not a directory")
            }
        }
        let environment = try Environment.build(inherit: inheritEnvironment, adding: extraEnvironment)
        let executable = try CommandLookup.resolve(program, path: environment.path, cwd: cwd)

        try PreviousAttempt.end(before: step)
        let outcome = try SigpipeGuard.whileBlocked { () throws(StepError) in
            let child = try Spawner.spawn(executable: executable, argv: command, environment: environment.entries,
                                          cwd: cwd, withStdin: stdinText != nil)
            PreviousAttempt.record(child, in: step)
            step.log(.debug, "started \(program) as pid \(child.commandPID) in process group \(child.pid)")
            return ChildSupervisor(step: step, child: child, stdinBytes: Array((stdinText ?? "").utf8),
                                   graceMilliseconds: grace).run()
        }

        var outputs = Outputs()
        outputs.stdout = outcome.stdout.text
        outputs.stderr = outcome.stderr.text
        outputs.json = outcome.stdout.isTruncated ? nil : parsedJSON(outcome.stdout.text)
        switch outcome.ending {
        case .exited(let status) where !outcome.stopped: outputs.exitCode = Int(status)
        case .signalled(let signal) where !outcome.stopped: outputs.signal = Int(signal)
        default: break  // stopped (cancelled): its status says nothing about the command
        }
        try step.setOutputs(outputs)

        if outcome.stopped {
            throw StepError.cancelled("\(program) was stopped: SIGTERM" + (outcome.killed ? ", then SIGKILL" : ""))
        }
        let lastError = outcome.stderr.lastLine.isEmpty ? "" : ": \(outcome.stderr.lastLine)"
        switch outcome.ending {
        case .exited(let status):
            if status == 0 { return }
            let message = "\(program) exited with status \(status)\(lastError)"
            // The retry policy decides (non_retryable: [exit_N]); the deprecated list, when
            // given, still makes every status it does not name permanent.
            if let retryableCodes, !retryableCodes.contains(Int64(status)) {
                throw StepError.permanent(message + " (not in retryable_exit_codes)", code: "exit_\(status)")
            }
            throw StepError.retryable(message, code: "exit_\(status)")
        case .signalled(let signal):
            throw StepError.retryable("\(program) was killed by signal \(signal) (\(signalName(signal)))\(lastError)",
                                      code: "signal_\(signal)")
        case .lost:
            throw StepError.permanent("\(program) ended but its exit status was collected by someone else", code: "status_lost")
        }
    }

    /// stdout as JSON when it is an object or an array (a bare string or number is left alone:
    /// `echo 42` is text).
    private static func parsedJSON(_ text: String) -> JSONValue? {
        let trimmed = text.drop { $0.isWhitespace }
        guard trimmed.first == "{" || trimmed.first == "[" else { return nil }
        return try? JSONValue(parsing: String(trimmed))
    }

    /// "500ms", "5s", "2m", "1h" → milliseconds.
    static func parseDuration(_ text: String, input: String) throws(StepError) -> Int64 {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            if let value = Int64(text.dropLast(suffix.count)), value >= 0 { return value * factor }
        }
        throw StepError.invalidInput("input '\(input)' must be a duration like 500ms, 5s, 1m or 1h, not \"\(text)\"")
    }

    private static func signalName(_ signal: Int32) -> String {
        let names: [Int32: String] = [SIGHUP: "SIGHUP", SIGINT: "SIGINT", SIGQUIT: "SIGQUIT", SIGILL: "SIGILL",
                                      SIGABRT: "SIGABRT", SIGFPE: "SIGFPE", SIGKILL: "SIGKILL", SIGSEGV: "SIGSEGV",
                                      SIGPIPE: "SIGPIPE", SIGALRM: "SIGALRM", SIGTERM: "SIGTERM", SIGBUS: "SIGBUS"]
        return names[signal] ?? "signal \(signal)"
    }
}

/// The child's environment: orchestrate's own (unless `inherit_env: false`) plus `env`.
struct Environment {
    var entries: [String]
    var path: String?

    static func build(inherit: Bool, adding extra: [String: String]) throws(StepError) -> Environment {
        var values: [(String, String)] = []
        if inherit {
            #if canImport(Darwin)
            let environ = _NSGetEnviron().pointee!
            #endif
            var index = 0
            while let entry = environ[index] {
                let text = String(cString: entry)
                if let equals = text.firstIndex(of: "="), extra[String(text[..<equals])] == nil {
                    values.append((String(text[..<equals]), String(text[text.index(after: equals)...])))
                }
                index += 1
            }
        }
        for (key, value) in extra.sorted(by: { $0.key < $1.key }) {
            guard !key.isEmpty, !key.contains("="), !key.contains("\0") else {
                throw .invalidInput("env: \"\(key)\" is not a valid variable name")
            }
            values.append((key, value))
        }
        return Environment(entries: values.map { "\($0.0)=\($0.1)" }, path: values.last { $0.0 == "PATH" }?.1)
    }
}

/// Blocks SIGPIPE on the calling thread while the child's stdin is written, so a command that
/// exits without reading it makes write() fail with EPIPE instead of killing orchestrate.
enum SigpipeGuard {
    static func whileBlocked<T>(_ body: () throws(StepError) -> T) throws(StepError) -> T {
        var block = sigset_t(), previous = sigset_t()
        sigemptyset(&block)
        sigaddset(&block, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &block, &previous)
        defer {
            // Consume a SIGPIPE raised meanwhile, then restore the mask.
            var pending = sigset_t()
            sigpending(&pending)
            if sigismember(&pending, SIGPIPE) == 1 {
                var zero = timespec()
                _ = sigtimedwait(&block, nil, &zero)
            }
            pthread_sigmask(SIG_SETMASK, &previous, nil)
        }
        return try body()
    }
}
