// The built-in exec plugin, loaded from the products directory, running real commands.
import Foundation
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateTestSupport
import Testing

private func execInvocation(_ inputs: JSONValue, delegate: RecordingDelegate = RecordingDelegate(),
                            timeout: Duration? = nil) throws -> StepInvocation
{
    guard let step = try Fixtures.builtIn("exec").stepTypes.first(where: { $0.id == "exec" }) else {
        throw TestFailure("exec plugin has no exec step")
    }
    return StepInvocation(stepType: step, request: request(inputs, timeout: timeout), delegate: delegate)
}

private func runExec(_ inputs: JSONValue, delegate: RecordingDelegate = RecordingDelegate(), timeout: Duration? = nil)
    async throws -> Result<[String: JSONValue], StepFailure>
{
    try await execInvocation(inputs, delegate: delegate, timeout: timeout).runOnThread()
}

/// True while `pid` is a live (not zombie) process.
private func isAlive(_ pid: Int32) -> Bool {
    guard kill(pid, 0) == 0 else { return false }
    let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
    guard let close = stat.lastIndex(of: ")") else { return false }
    let state = stat[stat.index(close, offsetBy: 2)]
    return state != "Z" && state != "X"
}

/// Waits up to 5 s for `file` to hold a pid.
private func readPid(_ file: URL) async throws -> Int32 {
    for _ in 0..<500 {
        if let text = try? String(contentsOf: file, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            return pid
        }
        try await Task.sleep(for: .milliseconds(10))
    }
    throw TestFailure("no pid in \(file.path)")
}

@Suite struct ExecPluginTests {
    @Test func envCwdAndStdin() async throws {
        let dir = TemporaryDirectory()
        let delegate = RecordingDelegate()
        let outputs = try #require(try await runExec([
            "command": ["sh", "-c", #"printf '%s|%s|' "$SECRET" "$(pwd -P)"; cat"#],
            "env": ["SECRET": "s3cr3t value"],
            "cwd": .string(dir.path),
            "stdin": "from stdin\nsecond line",
        ], delegate: delegate).outputs)
        let cwd = dir.url.resolvingSymlinksInPath().path
        #expect(outputs["stdout"] == .string("s3cr3t value|\(cwd)|from stdin\nsecond line"))
        #expect(outputs["exit_code"] == 0)
        #expect(outputs["stderr"] == "")
        #expect(outputs["json"] == nil)
        // stdout is streamed to the log at info, line by line.
        #expect(delegate.logs.filter { $0.0 == .info }.map(\.1) == ["s3cr3t value|\(cwd)|from stdin", "second line"])
    }

    @Test func environmentCanStartEmpty() async throws {
        let outputs = try #require(try await runExec([
            "command": ["/usr/bin/env"], "env": ["ONLY": "this"], "inherit_env": false,
        ]).outputs)
        #expect(outputs["stdout"] == "ONLY=this\n")
    }

    @Test func inheritedEnvironmentIsExtended() async throws {
        let outputs = try #require(try await runExec(["command": ["sh", "-c", "echo \"$HOME:$EXTRA\""], "env": ["EXTRA": "x"]]).outputs)
        #expect(outputs["stdout"] == .string("\(ProcessInfo.processInfo.environment["HOME"] ?? ""):x\n"))
    }

    @Test func aNonZeroExitIsRetryableWithItsStatusAsCode() async throws {
        let delegate = RecordingDelegate()
        let failure = try #require(try await runExec(["command": ["sh", "-c", "echo working; echo 'it broke' >&2; exit 3"]],
                                                     delegate: delegate).failure)
        // Retryable, so the step's retry policy decides; `non_retryable: [exit_3]` matches the code.
        #expect(failure.kind == .retryable)
        #expect(failure.code == "exit_3")
        #expect(failure.message == "sh exited with status 3: it broke")
        #expect(delegate.logs.contains { $0.0 == .warn && $0.1 == "it broke" })
    }

    @Test func theDeprecatedRetryableExitCodesKeepTheirMeaning() async throws {
        let delegate = RecordingDelegate()
        let listed = try #require(try await runExec(["command": ["sh", "-c", "exit 75"], "retryable_exit_codes": [75, 76]],
                                                    delegate: delegate).failure)
        #expect(listed.kind == .retryable && listed.code == "exit_75")
        #expect(delegate.logs.contains { $0.0 == .warn && $0.1.hasPrefix("retryable_exit_codes is deprecated") })
        let other = try #require(try await runExec(["command": ["sh", "-c", "exit 1"], "retryable_exit_codes": [75]]).failure)
        #expect(other.kind == .permanent && other.code == "exit_1")
        #expect(other.message == "sh exited with status 1 (not in retryable_exit_codes)")
    }

    @Test func killedBySignalIsRetryable() async throws {
        let failure = try #require(try await runExec(["command": ["sh", "-c", "kill -KILL $$"]]).failure)
        #expect(failure.kind == .retryable)
        #expect(failure.code == "signal_9")
        #expect(failure.message == "sh was killed by signal 9 (SIGKILL)")
    }

    @Test func jsonOnStdoutIsParsed() async throws {
        let outputs = try #require(try await runExec(["command": ["printf", #" {"id": 7, "tags": ["a", "b"]}\n"#]]).outputs)
        #expect(outputs["json"] == ["id": 7, "tags": ["a", "b"]])
        let text = try #require(try await runExec(["command": ["echo", "42"]]).outputs)
        #expect(text["json"] == nil)
        #expect(text["stdout"] == "42\n")
    }

    @Test func outputTailIsBounded() async throws {
        // 200 000 bytes of digits and newlines; the output keeps the last 64 KiB.
        let outputs = try #require(try await runExec(["command": ["sh", "-c", "i=0; while [ $i -lt 20000 ]; do echo 123456789; i=$((i+1)); done"]]).outputs)
        let stdout = try #require(outputs["stdout"]?.stringValue)
        #expect(stdout.utf8.count == 64 << 10)
        #expect(stdout.hasSuffix("123456789\n"))
    }

    @Test func largeStdinAndAChildThatIgnoresIt() async throws {
        let big = String(repeating: "x", count: 1 << 20)
        let counted = try #require(try await runExec(["command": ["wc", "-c"], "stdin": .string(big)]).outputs)
        #expect(counted["stdout"]?.stringValue?.trimmingCharacters(in: .whitespacesAndNewlines) == "1048576")
        // The child exits without reading: the write fails with EPIPE, orchestrate survives.
        let ignored = try await runExec(["command": ["true"], "stdin": .string(big)])
        #expect(ignored.outputs?["exit_code"] == 0)
    }

    @Test func commandNotFoundIsInvalidInput() async throws {
        let failure = try #require(try await runExec(["command": ["no-such-command-orchestrate"]]).failure)
        #expect(failure.kind == .invalidInput)
        #expect(failure.code == "command_not_found")
        #expect(failure.message.hasPrefix("command not found: no-such-command-orchestrate (searched PATH="))
        let path = try #require(try await runExec(["command": ["/nonexistent/tool"]]).failure)
        #expect(path.kind == .invalidInput && path.message == "command not found: /nonexistent/tool; fix command[0]")
        let dir = TemporaryDirectory()
        let plain = dir.write("plain.sh", "echo not executable\n")
        let notExecutable = try #require(try await runExec(["command": [.string(plain.path)]]).failure)
        #expect(notExecutable.kind == .invalidInput && notExecutable.code == "not_executable")
    }

    @Test func badInputs() async throws {
        let notArray = try #require(try await runExec(["command": "ls -l"]).failure)
        #expect(notArray.kind == .invalidInput && notArray.message == #"step 'step-1': input 'command' must be an array, not a string ("ls -l")"#)
        let empty = try #require(try await runExec(["command": []]).failure)
        #expect(empty.kind == .invalidInput)
        let grace = try #require(try await runExec(["command": ["true"], "kill_grace": "soon"]).failure)
        #expect(grace.kind == .invalidInput)
        let cwd = try #require(try await runExec(["command": ["true"], "cwd": "/nonexistent/dir"]).failure)
        #expect(cwd.kind == .invalidInput && cwd.message == "cwd /nonexistent/dir is not a directory")
    }

    @Test func cancelTerminatesTheProcessGroup() async throws {
        let dir = TemporaryDirectory()
        let pidFile = dir.file("pid")
        // The grandchild (sleep) is what must die too: it is in the command's process group.
        let invocation = try execInvocation(["command": ["sh", "-c", .string("sleep 60 & echo $! > '\(pidFile.path)'; wait")]])
        let running = Task { await invocation.runTimed() }
        let grandchild = try await readPid(pidFile)
        #expect(isAlive(grandchild))
        let cancelledAt = ContinuousClock.now
        invocation.cancel(.cancelled)
        let timed = await running.value
        let (result, took) = (timed.result, timed.ended - cancelledAt)
        #expect(result.failure?.kind == .cancelled)
        #expect(took < .seconds(2))
        try await Task.sleep(for: .milliseconds(100))
        #expect(!isAlive(grandchild))
    }

    @Test func sigkillAfterTheGracePeriod() async throws {
        let dir = TemporaryDirectory()
        let pidFile = dir.file("pid")
        let delegate = RecordingDelegate()
        let invocation = try execInvocation(["command": ["sh", "-c", .string("trap '' TERM; echo $$ > '\(pidFile.path)'; while :; do sleep 0.05; done")],
                                             "kill_grace": "300ms"], delegate: delegate)
        let running = Task { await invocation.runTimed() }
        let shell = try await readPid(pidFile)
        let cancelledAt = ContinuousClock.now
        invocation.cancel(.cancelled)
        let timed = await running.value
        let (result, took) = (timed.result, timed.ended - cancelledAt)
        let failure = try #require(result.failure)
        #expect(failure.kind == .cancelled)
        #expect(failure.message == "sh was stopped: SIGTERM, then SIGKILL")
        #expect(took >= .milliseconds(300) && took < .seconds(3))
        #expect(!isAlive(shell))
        #expect(delegate.logText.contains("sent SIGKILL"))
    }

    /// The exec guard sits between the plugin and the command: the command still gets only
    /// its standard streams, signals sent to the group reach it, and its status comes back.
    @Test func theGuardIsInvisibleToTheCommand() async throws {
        let fds = try #require(try await runExec(["command": ["sh", "-c", "ls /proc/$$/fd"]]).outputs)
        #expect(fds["stdout"] == "0\n1\n2\n")

        let dir = TemporaryDirectory()
        let pidFile = dir.file("pid")
        let invocation = try execInvocation(["command": ["sh", "-c", .string(
            "trap 'echo got USR1; exit 42' USR1; echo $$ > '\(pidFile.path)'; while :; do sleep 0.05; done")]])
        let running = Task { await invocation.runTimed() }
        let shell = try await readPid(pidFile)
        let stat = try String(contentsOfFile: "/proc/\(shell)/stat", encoding: .utf8)
        let afterName = try #require(stat.lastIndex(of: ")"))
        let group = try #require(Int32(stat[stat.index(after: afterName)...].split(separator: " ")[2]))
        #expect(group != shell, "the guard leads the command's group")
        kill(-group, SIGUSR1)
        let failure = try #require(await running.value.result.failure)
        #expect(failure.code == "exit_42")

        // A file that execve refuses (no #! line, not a binary) is invalid input, as before the guard.
        let text = dir.write("not-a-program", "just text\n")
        chmod(text.path, 0o755)
        let refused = try #require(try await runExec(["command": [.string(text.path)]]).failure)
        #expect(refused.kind == .invalidInput)
        #expect(refused.code == "command_not_runnable")
        #expect(refused.message == "cannot run \(text.path): Exec format error")
    }

    @Test func timeoutStopsTheCommand() async throws {
        let timed = try await execInvocation(["command": ["sleep", "30"]], timeout: .milliseconds(300)).runTimed()
        let (result, took) = (timed.result, timed.took)
        #expect(result.failure?.kind == .timeout)
        #expect(took < .seconds(2))
    }
}
