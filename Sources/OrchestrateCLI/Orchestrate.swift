import ArgumentParser
import Foundation
import OrchestratePluginHost

/// The `orchestrate` command line. Each subcommand lives in its own file.
///
/// Exit status: 0 success, 1 the run failed or was cancelled, 2 bad workflow or usage,
/// 130 interrupted (SIGINT/SIGTERM).
public struct Orchestrate: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "orchestrate",
        abstract: "Run upload and download workflows declared as YAML step graphs.",
        discussion: """
            State lives in --state DIR, else $ORCHESTRATE_STATE, else $XDG_STATE_HOME/orchestrate \
            (~/.local/state/orchestrate). Plugins come from the install's own plugin folder, then \
            $ORCHESTRATE_PLUGIN_PATH, then --plugin-path; never from the current directory.

            Exit status: 0 success, 1 the run failed or was cancelled, 2 bad workflow or usage, \
            130 interrupted.

            Examples:
              orchestrate validate flow.yaml
              orchestrate run flow.yaml --input source=movie.mov
              orchestrate submit flow.yaml --input source=movie.mov  # `serve` runs it
              orchestrate status RUN --watch
              orchestrate help run               # a command's options and examples
            """,
        version: OrchestrateVersion.description,
        subcommands: [SchemaCommand.self],  // hidden: generated documents (schemas/)
        // Grouped by what the reader wants to do (help shows "RUN SUBCOMMANDS:", ...), in the order
        // they usually need them.
        groupedSubcommands: [
            CommandGroup(name: "Run", subcommands: [
                RunCommand.self, ResumeCommand.self, ValidateCommand.self, GraphCommand.self,
                AddPathCommand.self, CloseCommand.self, CopyCommand.self, RemoteCommand.self,
            ]),
            CommandGroup(name: "Queue", subcommands: [
                SubmitCommand.self, ServeCommand.self, QueueCommand.self, CancelCommand.self, StopCommand.self,
                PauseCommand.self, UnpauseCommand.self, RunNowCommand.self, RetryCommand.self, DeleteCommand.self,
                PruneCommand.self, ScheduleCommand.self, SchedulesCommand.self,
            ]),
            CommandGroup(name: "Inspection", subcommands: [StatusCommand.self, ListCommand.self, EventsCommand.self]),
            CommandGroup(name: "Plugin", subcommands: [PluginsCommand.self]),
        ])

    public init() {}

    /// Parses the arguments and runs the command, mapping errors to the documented exit
    /// statuses (argument-parser's own usage errors become 2).
    public static func runMain(_ arguments: [String] = Array(CommandLine.arguments.dropFirst())) -> Never {
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
            ProcessExit.now(0)
        } catch let exit as ExitCode {
            ProcessExit.now(exit.rawValue)
        } catch let failure as CLIFailure {
            if !failure.message.isEmpty { Terminal.error(failure.message) }
            ProcessExit.now(failure.status)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                ProcessExit.now(0)
            }
            Terminal.error(withoutErrorPrefix(fullMessage(for: error)))
            ProcessExit.now(code == .validationFailure ? ExitStatus.usage : code.rawValue)
        }
    }
}

/// argument-parser's message without its own "Error: ": `Terminal.error` adds "error: " already.
func withoutErrorPrefix(_ message: String) -> String {
    message.hasPrefix("Error: ") ? String(message.dropFirst("Error: ".count)) : message
}

/// The documented exit statuses.
public enum ExitStatus {
    public static let success: Int32 = 0
    public static let runFailed: Int32 = 1
    public static let usage: Int32 = 2
    public static let interrupted: Int32 = 130
    /// stdout was a pipe whose reader had gone (`orchestrate list | head`): what a shell
    /// reports for a process SIGPIPE ended.
    public static let brokenPipe: Int32 = 141
}

/// An error the CLI reports with a message and a chosen exit status.
struct CLIFailure: Error {
    let status: Int32
    let message: String

    static func usage(_ message: String) -> CLIFailure { CLIFailure(status: ExitStatus.usage, message: message) }
}
