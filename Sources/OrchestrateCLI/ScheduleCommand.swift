import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateOperations
import OrchestrateStore

/// `orchestrate schedule add|pause|resume|remove`: schedules live in the state store, so every
/// `serve` sharing it (on every node) fires them, each time exactly once.
struct ScheduleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schedule",
        abstract: "Register, run now, pause, resume or remove a workflow's schedules (its `on: schedule:`).",
        discussion: """
            A registered schedule is kept in the state store with the workflow's text: any `serve` \
            on that store starts its runs (one run per due time, however many serve processes or \
            nodes share the store). Edit the file, then `schedule add --replace` to update it. \
            `orchestrate schedules` lists them with their next times.

            Examples:
              orchestrate schedule add nightly-upload.yaml
              orchestrate schedule add nightly.yaml --name nightly-eu --queue uploads --replace
              orchestrate schedule run nightly-upload        # one run now, as a firing would
              orchestrate schedule pause nightly-upload
              orchestrate schedule resume nightly-upload
              orchestrate schedule remove nightly-upload
            """,
        subcommands: [Add.self, RunNow.self, Pause.self, Resume.self, Remove.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register the `on: schedule:` entries of a workflow file.",
            discussion: """
                Validates the workflow (exit 2 on errors, all of them at once). Entries without \
                `timezone:` get this process's zone ($TZ, else the local zone), recorded now so \
                every node agrees. Relative paths in a schedule's inputs are taken from the \
                workflow file's folder. The first run is at the first due time after now: \
                registering never starts past times.

                Examples:
                  orchestrate schedule add nightly-upload.yaml
                  TZ=Europe/Berlin orchestrate schedule add nightly.yaml --name nightly-berlin --replace
                """)

        @Argument(help: "The workflow file.") var file: String
        @Option(help: ArgumentHelp("The schedule's name (default: the workflow's name).", valueName: "name"))
        var name: String?
        @Option(help: ArgumentHelp("The named queue its runs go to (default: default).", valueName: "name"))
        var queue: String = "default"
        @Option(help: "Priority of its runs (default 0).") var priority: Int = 0
        @Flag(help: "Replace a schedule of the same name (its entries keep their place in time).") var replace = false
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if !QueueName.isValid(queue) { throw ValidationError("--queue \(queue): \(QueueName.rule)") }
        }

        func run() throws {
            let registry = global.loadPlugins()
            let workflow = try WorkflowLoading.load(path: absolute(file), registry: registry)
            guard !workflow.triggers.schedules.isEmpty else {
                throw CLIFailure.usage("\(file) has no 'on: schedule:' entries to register")
            }
            let name = self.name ?? workflow.name
            guard QueueName.isValid(name) else {
                throw CLIFailure.usage("the schedule name '\(name)' is not usable: \(QueueName.rule.replacingOccurrences(of: "a queue name", with: "a name")); give --name")
            }
            let store = try global.openStore()
            let clock = ScheduleClock(store: store)
            if !replace, try store.schedules().contains(where: { $0.name == name }) {
                throw CLIFailure.usage("a schedule named \(name) exists: add --replace to replace it, or choose another --name")
            }
            let records: [ScheduleRecord]
            do {
                records = try ScheduleRegistration.records(workflow, name: name, queue: queue, priority: priority,
                                                           defaultZone: ScheduleRegistration.defaultZone(), now: try clock.now())
            } catch let problem as ScheduleRegistration.Problem {
                throw CLIFailure.usage(problem.description)
            }
            try store.saveSchedule(records)
            for record in try store.schedules() where record.name == name {
                Terminal.line(global.json ? ScheduleListing.json(record, now: try clock.now()).jsonText
                                          : ScheduleListing.line(record, now: try clock.now()))
            }
        }

        private func absolute(_ path: String) -> String {
            path.hasPrefix("/") ? path : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path)
        }
    }

    struct RunNow: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Queue one run of a schedule now, as its next firing would (labelled trigger=manual).",
            discussion: """
                The run has the entry's workflow (as registered), inputs, queue and priority, and the \
                labels schedule=NAME and trigger=manual; a `serve` on the store runs it. The \
                schedule's own times do not change. A schedule with several entries needs NAME#N \
                (`orchestrate schedules` lists them). Prints the run's id.

                Examples:
                  orchestrate schedule run nightly-upload
                  orchestrate schedule run nightly-upload#2 --json
                """)
        @Argument(help: ArgumentHelp("The schedule's name, or NAME#N for its entry N.", valueName: "name")) var name: String
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let store = try global.openStore()
            let entry = try ScheduleCommand.entry(name, store)
            let (run, events) = ScheduleFirer.manualRunRecord(for: entry, now: Date().timeIntervalSince1970)
            try store.createRun(run, events: events)
            Terminal.line(global.json ? "{\"id\":\"\(run.id)\"}" : run.id)
        }
    }

    /// The entry `NAME#N` names, or the only entry of `NAME`.
    static func entry(_ text: String, _ store: any StateStore) throws -> ScheduleRecord {
        let parts = text.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let name = parts[0]
        let entries = try store.schedules().filter { $0.name == name }
        guard !entries.isEmpty else { throw unknown(name, store) }
        if parts.count == 2 {
            guard let number = Int(parts[1]), let entry = entries.first(where: { $0.entry == number }) else {
                throw CLIFailure.usage("schedule \(name) has no entry '\(parts[1])' (entries: "
                    + entries.map { "\(name)#\($0.entry)" }.joined(separator: ", ") + ")")
            }
            return entry
        }
        guard entries.count == 1 else {
            throw CLIFailure.usage("schedule \(name) has \(entries.count) entries: name one, as "
                + entries.map { "\(name)#\($0.entry)" }.joined(separator: " or "))
        }
        return entries[0]
    }

    struct Pause: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop starting runs of a schedule (runs already started go on).",
            discussion: "Examples:\n  orchestrate schedule pause nightly-upload\n  orchestrate schedules                # shows it paused")
        @Argument(help: "The schedule's name.") var name: String
        @OptionGroup var global: GlobalOptions

        func run() throws { try ScheduleCommand.setPaused(true, name, global) }
    }

    struct Resume: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a paused schedule's runs again, from its next time (times passed while paused are not caught up).",
            discussion: "Examples:\n  orchestrate schedule resume nightly-upload")
        @Argument(help: "The schedule's name.") var name: String
        @OptionGroup var global: GlobalOptions

        func run() throws { try ScheduleCommand.setPaused(false, name, global) }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unregister a schedule (the runs it started stay).",
            discussion: "Examples:\n  orchestrate schedule remove nightly-upload")
        @Argument(help: "The schedule's name.") var name: String
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let store = try global.openStore()
            guard try store.removeSchedule(name) else { throw ScheduleCommand.unknown(name, store) }
            Terminal.line("schedule \(name) removed")
        }
    }

    /// `pause` and `resume`: by the store's clock, so resuming skips the times that passed.
    static func setPaused(_ paused: Bool, _ name: String, _ global: GlobalOptions) throws {
        let store = try global.openStore()
        guard try store.setSchedulePaused(name, paused: paused, at: Int64(try ScheduleClock(store: store).now())) else {
            throw unknown(name, store)
        }
        Terminal.line("schedule \(name) \(paused ? "paused" : "resumed")")
    }

    static func unknown(_ name: String, _ store: any StateStore) -> CLIFailure {
        let names = Set((try? store.schedules())?.map(\.name) ?? []).sorted()
        return CLIFailure.usage("no schedule named \(name)" + (names.isEmpty ? " (none is registered)" : " (schedules: \(names.joined(separator: ", ")))"))
    }
}
