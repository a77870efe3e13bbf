import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateOperations
import OrchestrateStore

/// `--server URL --token-file F [--cacert F]`: `status`, `list` and `events` read a remote
/// `serve --http` through its API instead of the local store.
struct RemoteOptions: ParsableArguments {
    @Option(name: .customLong("server"), help: ArgumentHelp(
        "Read from a remote `serve --http` at this URL (as serve printed it, without the token) instead of the store.",
        valueName: "url"))
    var server: String?

    @Option(name: .customLong("token-file"), help: ArgumentHelp(
        "With --server: the file holding the bearer token (a read-only token is enough).", valueName: "file"))
    var tokenFile: String?

    @Option(name: .customLong("cacert"), help: ArgumentHelp(
        "With --server https://…: trust the server's certificate if this CA (PEM) signed it (default: the system's CAs).",
        valueName: "file"))
    var caFile: String?

    /// The remote reader, or the local one on the store `global` names.
    func reader(_ global: GlobalOptions) throws -> any RunReader {
        guard let server else {
            if tokenFile != nil || caFile != nil { throw CLIFailure.usage("--token-file and --cacert go with --server URL") }
            return LocalRunReader(store: try global.openStore(), location: try global.storeLocation().redacted)
        }
        guard let tokenFile else { throw CLIFailure.usage("--server needs --token-file FILE (the serve's http-token, or a token of --http-token-file)") }
        return RemoteRunReader(client: try APIClient(server: server, tokenFile: tokenFile, caFile: caFile))
    }
}

/// Which runs `list` shows: every field given must match (`statuses` as `RunDocument.effectiveStatus`
/// names them); `limit` keeps the newest.
struct RunSelection {
    var statuses: Set<String> = []
    var labels: [String: String] = [:]
    var queues: Set<String>?
    var workflow: String?
    var idPrefixes: [String] = []
    var limit: Int?
}

/// What `status`, `list` and `events` read, in the JSON forms the API serves (`RunDocument`,
/// `EventRecord.json`), so one printer shows a local and a remote run alike.
protocol RunReader {
    /// Where the runs are, for messages ("no run X in …").
    var location: String { get }
    /// `RunDocument.detail` with that window of the run's items, or nil when there is no such run.
    func detail(_ id: String, items: ItemWindow) throws -> JSONValue?
    /// The runs `selection` picks, oldest first; with `transfer`, as `RunDocument.summaries`
    /// (else `RunDocument.json`: a remote reader always gives summaries).
    func runs(_ selection: RunSelection, transfer: Bool) throws -> [JSONValue]
    /// Up to `limit` events after `after`, of a run or of all, in the `events --json` form.
    func events(runID: String?, after: Int64, limit: Int) throws -> [JSONValue]
    /// Whether the run is over (succeeded, failed, cancelled); false when it is gone.
    func isFinished(_ id: String) throws -> Bool
    /// The highest event seq retention removed (0: none).
    func prunedThrough() throws -> Int64
}

extension RunReader {
    /// `detail(id, items:)` with the first page of items.
    func detail(_ id: String) throws -> JSONValue? { try detail(id, items: .first) }

    func isFinished(_ id: String) throws -> Bool {
        guard let status = try detail(id)?["status"]?.stringValue else { return false }
        return RunStatus(rawValue: status)?.isFinished ?? false
    }
}

struct LocalRunReader: RunReader {
    let store: any StateStore
    let location: String

    func detail(_ id: String, items: ItemWindow) throws -> JSONValue? { try RunDocument.detail(ofRun: id, store: store, items: items) }

    func runs(_ selection: RunSelection, transfer: Bool) throws -> [JSONValue] {
        var filter = RunFilter(labels: selection.labels, queues: selection.queues, workflow: selection.workflow, limit: selection.limit)
        filter.idPrefixes = selection.idPrefixes
        let runs = try RunListing.runs(store, statuses: selection.statuses, filter: filter)
        return transfer ? try RunDocument.summaries(runs, store: store) : runs.map { RunDocument.json($0) }
    }

    func events(runID: String?, after: Int64, limit: Int) throws -> [JSONValue] {
        try store.events(runID: runID, afterSeq: after, limit: limit).map(\.json)
    }

    /// The record alone (`events --follow` asks every 0.2 s).
    func isFinished(_ id: String) throws -> Bool { try store.run(id)?.status.isFinished ?? false }

    func prunedThrough() throws -> Int64 { try store.prunedThrough() }
}

struct RemoteRunReader: RunReader {
    let client: APIClient
    var location: String { client.server }

    func detail(_ id: String, items: ItemWindow) throws -> JSONValue? {
        var query = "?items_limit=\(max(1, items.limit))"
        if items.last { query += "&items_last=true" } else if let after = items.after { query += "&items_after=" + APIClient.encode(after.text) }
        guard var detail = try client.get("/api/runs/\(APIClient.encode(id))" + query, missingIsNil: true)?.objectValue else { return nil }
        detail["graph"] = nil  // for the dashboard; not part of `status --json`
        return .object(detail)
    }

    /// The newest `maxListed` runs (the API's bound on one list).
    static let maxListed = 1000

    /// The API has no id filter: the newest runs are read and filtered by id here.
    func runs(_ selection: RunSelection, transfer: Bool) throws -> [JSONValue] {
        let limit = selection.idPrefixes.isEmpty ? min(selection.limit ?? Self.maxListed, Self.maxListed) : Self.maxListed
        var query = ["limit=\(limit)"]
        query += selection.statuses.sorted().map { "status=" + APIClient.encode($0) }
        query += selection.labels.sorted { $0.key < $1.key }.map { "label=" + APIClient.encode("\($0.key)=\($0.value)") }
        query += (selection.queues ?? []).sorted().map { "queue=" + APIClient.encode($0) }
        if let workflow = selection.workflow { query.append("workflow=" + APIClient.encode(workflow)) }
        let runs = try client.get("/api/runs?" + query.joined(separator: "&"))?["runs"]?.arrayValue ?? []
        if runs.count == Self.maxListed, (selection.limit ?? .max) > Self.maxListed || !selection.idPrefixes.isEmpty {
            Terminal.warning("\(client.server) lists the newest \(Self.maxListed) runs only")
        }
        let matching = runs.filter { run in
            selection.idPrefixes.isEmpty || selection.idPrefixes.contains { (run["id"]?.stringValue ?? "").hasPrefix($0) }
        }
        return selection.limit.map { Array(matching.suffix($0)) } ?? matching
    }

    func events(runID: String?, after: Int64, limit: Int) throws -> [JSONValue] {
        var path = "/api/journal?after=\(after)&limit=\(limit)"
        if let runID { path += "&run=" + APIClient.encode(runID) }
        return try client.get(path)?["events"]?.arrayValue ?? []
    }

    func prunedThrough() throws -> Int64 {
        try client.get("/api/journal?after=0&limit=1")?["pruned_through"]?.intValue ?? 0
    }
}
