import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateModel
import OrchestrateOperations
import OrchestratePluginHost
import OrchestrateTokenBucket

struct CopyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Copy a file or a folder between this machine and a server, as a resumable run.",
        discussion: """
            SRC and DST are local paths, REMOTE:PATH (a remote of the remotes file; `orchestrate remote \
            list`), or URLs: s3://BUCKET/KEY, sftp://[USER@]HOST[:PORT]/PATH (absolute; /~/PATH in the \
            login directory), ftp://[USER@]HOST[:PORT]/PATH (TLS required, AUTH TLS), ftps://… (TLS \
            from the first byte, port 990), and http:// or https:// to download. One side is local. \
            A DST ending in / (or an existing local folder) is the folder to copy into.

            The copy is a run of a one-step workflow named copy: journaled, shown by list and status, \
            resumable after Ctrl-C or kill -9 with `orchestrate resume RUN`, or by giving the same copy \
            command again. Passwords never go in a URL: define a remote (docs/remotes.md).

            Examples:
              orchestrate copy movie.mov media:masters/                # into a folder of an S3 remote
              orchestrate copy s3://media/masters/movie.mov ./         # credentials from AWS_* or ~/.aws
              orchestrate copy --recursive ./renders edit-bay:incoming/renders
              orchestrate copy sftp://deploy@files.example.com/srv/drop/a.bin /tmp/a.bin
              orchestrate copy https://example.com/big.iso ~/Downloads/ --max-rate 10M
            """)

    @Argument(help: "What to copy: a local path, REMOTE:PATH or a URL.")
    var source: String

    @Argument(help: "Where to: a local path, REMOTE:PATH or a URL.")
    var destination: String

    @Flag(name: [.customShort("r"), .long], help: "Copy a folder with everything in it (an S3 prefix with every key under it).")
    var recursive = false

    @Option(name: .customLong("if-exists"), help: ArgumentHelp(
        "An existing destination file: overwrite (default), skip, or if-different (size and modification time).", valueName: "policy"))
    var ifExists: String?

    @Option(name: .customLong("max-rate"), help: MaxRateOption.help("the copy (kept for resume)"), transform: MaxRateOption.parse)
    var maxRate: RateTimetable?

    @Flag(name: .customLong("new"), help: "Start a new copy even if the same copy was interrupted (it is otherwise continued).")
    var startNew = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let ifExists, !["overwrite", "skip", "if-different"].contains(ifExists) {
            throw ValidationError("--if-exists takes overwrite, skip or if-different, not '\(ifExists)'")
        }
    }

    func run() throws {
        let registry = global.loadPlugins()
        let remotesFile = RemotesFile()
        var loaded: Result<RemoteCatalog, RemotesUnavailable>?
        let remotes = {
            if loaded == nil { loaded = remotesFile.userRemotes() }
            return loaded!
        }
        let from = try endpoint(source, remotes)
        let to = try endpoint(destination, remotes)
        let summary = "orchestrate copy \(source) \(destination)"
        var options = CopyPlan.Options(recursive: recursive, ifExists: ifExists)
        let plan = try Self.plan(from, to, options, summary: summary, registry: registry)
        let workflow = try WorkflowLoading.parse(source: plan.workflowText, file: "<copy>", registry: registry)
        let inputs = plan.inputs
        try InputParsing.checkSecrets(workflow)
        let store = try global.openStore()
        if !startNew {
            // The same command again continues an interrupted copy, even one into a folder it
            // made itself: planned now, that folder would be one to put SRC in.
            var twin = try RunIdentity.interruptedTwin(of: workflow, inputs: inputs, store: store).map { (run: $0, workflow: workflow) }
            if twin == nil, case .local = to {
                options.destinationAsNew = true
                let before = try Self.plan(from, to, options, summary: summary, registry: registry)
                if before.workflowText != plan.workflowText || before.inputs != inputs {
                    let earlier = try WorkflowLoading.parse(source: before.workflowText, file: "<copy>", registry: registry)
                    twin = try RunIdentity.interruptedTwin(of: earlier, inputs: before.inputs, store: store).map { (run: $0, workflow: earlier) }
                }
            }
            if let twin {
                RunIdentity.announceResume(twin.run, workflow: twin.workflow, reason: "the same copy was interrupted (--new starts it again)")
                var run = twin.run
                if let maxRate { run.rateCap = maxRate }
                try RunSession.execute(run: run, workflow: twin.workflow, store: store, registry: registry, maxParallel: nil,
                                       global: global, options: try global.engineOptions())
            }
        }
        let run = try RunLauncher(store: store).create(workflow, inputs: inputs, maxRate: maxRate)
        try RunSession.execute(run: run, workflow: workflow, store: store, registry: registry, maxParallel: nil,
                               global: global, options: try global.engineOptions())
    }

    private static func plan(_ from: CopyEndpoint, _ to: CopyEndpoint, _ options: CopyPlan.Options, summary: String,
                              registry: PluginRegistry) throws -> CopyPlan
    {
        switch CopyPlan.make(source: from, destination: to, options: options, summary: summary, registry: registry) {
        case .success(let plan): return plan
        case .failure(let refusal): throw CLIFailure.usage(refusal.message)
        }
    }

    private func endpoint(_ text: String, _ remotes: () -> Result<RemoteCatalog, RemotesUnavailable>) throws -> CopyEndpoint {
        switch CopyEndpoint.parse(text, remotes: remotes) {
        case .success(let endpoint): return endpoint
        case .failure(let refusal): throw CLIFailure.usage(refusal.message)
        }
    }
}
