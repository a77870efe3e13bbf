import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateOperations
import OrchestrateTokenBucket
import OrchestrateModel
import OrchestrateStore

struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a workflow now, in the foreground.",
        discussion: """
            Validates the workflow and its inputs, journals a new run in the state store, and executes \
            it, printing one line per step transition. Ctrl-C (or SIGTERM) interrupts it and leaves it \
            resumable: steps stop, nothing is undone, and the commands to continue (`orchestrate \
            resume RUN`) or undo it (`orchestrate cancel RUN`) are printed; a second Ctrl-C exits at \
            once. A run killed any other way continues with `orchestrate resume RUN` too.

            With --id NAME the run is that job: if a run NAME exists and is not finished, it is \
            continued (as `resume` does); if it succeeded, it is not run again unless --rerun is \
            given. Without --id, a run of the same workflow with the same inputs that was interrupted \
            and that no process executes is continued rather than started again from zero (--new \
            starts a new run anyway).

            Examples:
              orchestrate run workflows/vimeo-upload.yaml --input source=movie.mov
              orchestrate run workflows/http-download.yaml --id nightly-2026-11-27 --input url=https://…
              orchestrate run flow.yaml --inputs inputs.json --json > events.jsonl
              orchestrate run workflows/http-download.yaml --input url=https://… --max-rate 20M
            """)

    @Argument(help: "The workflow file.")
    var file: String

    @Option(name: .customLong("input"), help: ArgumentHelp("An input value, as NAME=VALUE (repeatable).", valueName: "name=value"))
    var inputs: [String] = []

    @Option(name: .customLong("inputs"), help: ArgumentHelp("A JSON object file of input values.", valueName: "file.json"))
    var inputsFile: String?

    @Option(name: .customLong("max-parallel"), help: ArgumentHelp(
        "Steps running at once in this process (default: the number of cores × 4, here \(ProcessInfo.processInfo.activeProcessorCount * 4)).",
        valueName: "n"))
    var maxParallel: Int?

    @Option(name: .customLong("label"), help: ArgumentHelp("A label for finding the run later, as KEY=VALUE (repeatable).", valueName: "key=value"))
    var labels: [String] = []

    @Option(name: .customLong("max-rate"), help: MaxRateOption.help("the run (all its transfers together; kept for resume)"),
            transform: MaxRateOption.parse)
    var maxRate: RateTimetable?

    @Option(help: ArgumentHelp("The run's id, naming the job: an unfinished run of that id is continued, a succeeded one not run again.",
                               valueName: "name"))
    var id: String?

    @Flag(help: "With --id: run again from the start even if a finished run of that id exists (it is replaced).")
    var rerun = false

    @Flag(name: .customLong("new"), help: "Start a new run even if an interrupted run of the same workflow and inputs exists.")
    var startNew = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let maxParallel, maxParallel < 1 { throw ValidationError("--max-parallel must be at least 1") }
        if let id, !RunID.isValid(id) { throw ValidationError("--id: \(RunID.Invalid(id: id, stored: false))") }
        if rerun && id == nil { throw ValidationError("--rerun replaces the finished run of an --id; give the --id") }
    }

    func run() throws {
        let registry = global.loadPlugins()
        let workflow = try WorkflowLoading.load(path: file, registry: registry)
        let resolvedInputs = try InputParsing.resolve(workflow: workflow, pairs: inputs, file: inputsFile)
        try InputParsing.checkSecrets(workflow)
        let store = try global.openStore()
        var existing: RunRecord?
        if let id {
            switch try RunIdentity.verdictForRun(id: id, workflow: workflow, inputs: resolvedInputs, rerun: rerun,
                                                 store: store, global: global) {
            case .create: break
            case .resume(let run):
                RunIdentity.announceResume(run, workflow: workflow, reason: "the unfinished run of id \(id)")
                existing = run
            }
        } else if !startNew, let twin = try RunIdentity.interruptedTwin(of: workflow, inputs: resolvedInputs, store: store) {
            RunIdentity.announceResume(twin, workflow: workflow,
                                       reason: "interrupted with the same workflow and inputs (--new starts a new run instead)")
            existing = twin
        }
        if var run = existing {
            // Continued as `resume` continues it: with the workflow it started with.
            if let maxRate { run.rateCap = maxRate }
            let started = try WorkflowLoading.parse(source: run.workflowSource, file: run.workflowFile, registry: registry)
            try InputParsing.checkSecrets(started)
            try RunSession.execute(run: run, workflow: started, store: store, registry: registry,
                                   maxParallel: maxParallel, global: global, options: try global.engineOptions())
        }
        let run = try RunLauncher(store: store)
            .create(workflow, inputs: resolvedInputs, id: id, labels: try InputParsing.labels(labels),
                    maxRate: maxRate)
        try RunSession.execute(run: run, workflow: workflow, store: store, registry: registry,
                               maxParallel: maxParallel, global: global,
                               options: try global.engineOptions())
    }
}

/// `--input K=V`, `--inputs FILE.json`, `--label K=V`, and the secrets a run needs.
enum InputParsing {
    static func resolve(workflow: Workflow, pairs: [String], file: String?,
                        extra: [String: JSONValue] = [:]) throws -> JSONValue
    {
        var strings: [String: String] = [:]
        for pair in pairs {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                throw CLIFailure.usage("--input takes NAME=VALUE, got '\(pair)'")
            }
            strings[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
        }
        var json: [String: JSONValue] = [:]
        if let file {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw CLIFailure.usage("cannot read the inputs file \(file)")
            }
            do {
                guard let object = try JSONValue(parsing: text).objectValue else {
                    throw CLIFailure.usage("\(file): the inputs file must hold a JSON object")
                }
                json = object
            } catch let error as JSONParseError {
                throw CLIFailure.usage("\(file): \(error)")
            }
        }
        json.merge(extra) { _, line in line }
        do {
            return try workflow.resolveInputs(strings: strings, json: json,
                                              currentDirectory: FileManager.default.currentDirectoryPath)
        } catch {
            throw CLIFailure.usage(error.messages.map { "\(workflow.file): \($0)" }.joined(separator: "\nerror: "))
        }
    }

    /// Every declared secret must be set before the run starts (each attempt reads it again).
    static func checkSecrets(_ workflow: Workflow) throws {
        let resolution = SecretResolver.resolve(workflow.secrets, environment: ProcessInfo.processInfo.environment)
        guard resolution.missing.isEmpty else {
            throw CLIFailure.usage(resolution.messages.joined(separator: "\nerror: "))
        }
    }

    /// The JSON objects of a `--batch` file, with their line numbers; blank lines skipped.
    static func batchLines(_ path: String) throws -> [(line: Int, inputs: [String: JSONValue])] {
        let data = path == "-" ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: path)
        guard let data else { throw CLIFailure.usage("cannot read \(path)") }
        var result: [(Int, [String: JSONValue])] = []
        for (n, line) in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.isEmpty { continue }
            guard let object = (try? JSONValue(parsing: text))?.objectValue else {
                throw CLIFailure.usage("\(path):\(n + 1): expected a JSON object of inputs")
            }
            result.append((n + 1, object))
        }
        return result
    }

    static func labels(_ pairs: [String]) throws -> [String: String] {
        var labels: [String: String] = [:]
        for pair in pairs {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                throw CLIFailure.usage("--label takes KEY=VALUE, got '\(pair)'")
            }
            labels[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
        }
        return labels
    }
}
