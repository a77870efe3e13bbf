import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateModel

struct RemoteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remote",
        abstract: "List, show and test the remotes of the remotes file.",
        discussion: """
            Remotes are named connections (S3, SFTP, FTP, HTTP) defined once in \
            $XDG_CONFIG_HOME/orchestrate/remotes.yaml (~/.config/orchestrate/remotes.yaml), mode 0600, \
            and used by steps (with: { remote: NAME }) and by `orchestrate copy NAME:PATH`. See \
            docs/remotes.md.

            Examples:
              orchestrate remote list
              orchestrate remote show media
              orchestrate remote test media
            """,
        subcommands: [List.self, Show.self, Test.self])

    /// The remotes file's catalog, or exit 2 saying why it cannot be used.
    static func catalog() throws -> (RemotesFile, RemoteCatalog) {
        let file = RemotesFile()
        switch file.userRemotes() {
        case .success(let catalog): return (file, catalog)
        case .failure(let unavailable):
            throw CLIFailure.usage(([unavailable.reason] + unavailable.diagnostics.map(\.description)).joined(separator: "\n"))
        }
    }

    static func remote(_ name: String) throws -> Remote {
        let (file, catalog) = try catalog()
        guard let remote = catalog[name] else {
            let hint = closestMatch(to: name, in: catalog.names).map { "; did you mean '\($0)'?" } ?? ""
            throw CLIFailure.usage("no remote '\(name)' in \(file.path)\(hint)")
        }
        return remote
    }

    /// How a field's value is shown: a reference says where the secret comes from, never its value.
    static func shown(_ value: RemoteValue) -> String {
        switch value {
        case .literal(let v): v.stringValue ?? v.jsonText
        case .environment(let name): "(secret, from the environment variable \(name))"
        case .file(let path): "(secret, from the file \(path))"
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the remotes: name, type and server.",
            discussion: """
                Examples:
                  orchestrate remote list
                  orchestrate remote list --json | jq -r .name
                """)

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let (file, catalog) = try RemoteCommand.catalog()
            if catalog.remotes.isEmpty && !global.json {
                Terminal.line("no remotes (\(file.path) defines none)")
                return
            }
            let width = max(catalog.names.map(\.count).max() ?? 0, 4)
            for remote in catalog.remotes {
                let server = ["endpoint", "host", "bucket"].compactMap { remote.field($0).map { RemoteCommand.shown($0.value) } }
                if global.json {
                    Terminal.line(JSONValue.object(["name": .string(remote.name), "type": .string(remote.type.rawValue),
                                                    "server": .string(server.joined(separator: " "))]).jsonText)
                } else {
                    Terminal.line("\(remote.name.padding(width)) \(remote.type.rawValue.padding(5)) \(server.joined(separator: " "))")
                }
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one remote's fields; a secret shows where it comes from, never its value.",
            discussion: """
                Examples:
                  orchestrate remote show media
                  orchestrate remote show media --json
                """)

        @Argument(help: "The remote's name.")
        var name: String

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let remote = try RemoteCommand.remote(name)
            if global.json {
                var fields: [String: JSONValue] = [:]
                for field in remote.fields {
                    switch field.value {
                    case .literal(let v): fields[field.name] = v
                    case .environment(let variable): fields[field.name] = .object(["env": .string(variable)])
                    case .file(let path): fields[field.name] = .object(["file": .string(path)])
                    }
                }
                Terminal.line(JSONValue.object(["name": .string(remote.name), "type": .string(remote.type.rawValue),
                                                "defined_at": .string(remote.location.description),
                                                "fields": .object(fields)]).jsonText)
                return
            }
            Terminal.line("\(remote.name) (\(remote.type.rawValue)), defined at \(remote.location)")
            let width = remote.fields.map(\.name.count).max() ?? 0
            for field in remote.fields {
                Terminal.line("  \(field.name.padding(width))  \(RemoteCommand.shown(field.value))")
            }
        }
    }

    struct Test: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Connect to a remote and look up a name that does not exist there: reads, never writes.",
            discussion: """
                Runs the remote's download step through the plugin host (the same code a workflow runs) \
                for a name that does not exist, into a temporary folder removed afterwards: S3 lists the \
                bucket under a test prefix (ListObjectsV2); SFTP and FTP log in, find remote_root and look \
                the name up in it. The remote works when the listing is empty or the server answers "no \
                such file". Exit status 0 when it works, 1 when \
                it does not (the plugin's error is printed), 2 for a remote that does not exist.

                Examples:
                  orchestrate remote test media
                """)

        @Argument(help: "The remote's name.")
        var name: String

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let remote = try RemoteCommand.remote(name)
            let registry = global.loadPlugins()
            let outcome = try RemoteProbe(remote: remote, registry: registry).run()
            if global.json {
                Terminal.line(JSONValue.object(["name": .string(remote.name), "ok": .bool(outcome.ok),
                                                "step": .string(outcome.stepType), "detail": .string(outcome.detail),
                                                "seconds": .double(outcome.seconds)]).jsonText)
            } else {
                let figure = String(format: "%.2f s", outcome.seconds)
                Terminal.line("\(remote.name): \(outcome.ok ? "ok" : "FAILED") (\(outcome.stepType), \(figure)): \(Terminal.escapingControls(outcome.detail))")
            }
            if !outcome.ok { throw CLIFailure(status: ExitStatus.runFailed, message: "") }
        }
    }
}
