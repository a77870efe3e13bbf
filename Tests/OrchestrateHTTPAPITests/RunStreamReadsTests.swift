import Foundation
import NIOCore
@testable import OrchestrateHTTPAPI
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// The run page's event stream (`items=live`) on a session of many files, in process on a real
/// store of each kind: it sends the run's events not about one file and what comes after it
/// opened, and what the server reads from the store for it (the stream's own catch-up and the
/// shared feed) is about what it sends, not the session's journal. A session of 40,000 watched
/// files cost `serve` +45 MiB when the page opened: the feed walked the whole journal from its
/// start and the stream read the run's 240,000 events to pick out 74.
@Suite(.serialized) struct RunStreamReadsTests {
    enum Kind: String, CaseIterable, Sendable { case sqlite, postgres }
    static let files = 2_000

    static func open(_ kind: Kind, _ dir: TemporaryDirectory) throws -> any StateStore {
        switch kind {
        case .sqlite: try StoreOpening.open(.sqlite(directory: dir.file("state").path))
        case .postgres: try StoreOpening.open(.postgres(connection: try PostgresServer.shared().createDatabase()))
        }
    }

    /// One file of the session "s" fed by a watch folder, with another run's progress between.
    static func file(_ n: Int) -> [EventRecord] {
        let id: JSONValue = .string("\(n)")
        return [EventRecord(runID: "s", time: 2, type: .watchHandedOver, data: ["path": .string("f\(n)")]),
                EventRecord(runID: "s", time: 2, type: .itemAdded, step: "accept", data: ["id": id]),
                EventRecord(runID: "s", time: 3, type: .itemStarted, step: "accept", data: ["id": id]),
                EventRecord(runID: "o", time: 3, type: .stepProgress, step: "copy", data: ["bytes_done": .int(Int64(n))]),
                EventRecord(runID: "s", time: 4, type: .itemFinished, step: "accept", data: ["id": id]),
                EventRecord(runID: "s", time: 4, type: .watchFinished, data: ["path": .string("f\(n)")])]
    }

    /// The seqs of an SSE text's events (`id: SEQ` lines).
    static func seqs(_ text: String) -> [Int64] {
        text.split(separator: "\n").compactMap { $0.hasPrefix("id: ") ? Int64($0.dropFirst(4)) : nil }
    }

    @Test(arguments: Kind.allCases)
    func aRunPageOnASessionOfManyFilesReadsItsOtherEventsNotTheJournal(_ kind: Kind) async throws {
        let dir = TemporaryDirectory("runstream")
        let store = try Self.open(kind, dir)
        for id in ["s", "o"] {
            let run = RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf", inputs: [:],
                                status: .running, createdAt: 1, runDir: RunRecord.runDirectory(for: id))
            try store.createRun(run, events: [EventRecord(runID: id, time: 1, type: .runAdded)])
        }
        try store.appendEvents([EventRecord(runID: "s", time: 2, type: .stepStarted, step: "accept")])
        for batch in stride(from: 0, to: Self.files, by: 500) {
            try store.appendEvents((batch ..< batch + 500).flatMap(Self.file)
                + [EventRecord(runID: "s", time: 4, type: .stepProgress, step: "accept", data: ["files_done": .int(Int64(batch + 500))])])
        }
        let services = APIServices(store: store, registry: PluginRegistry(searchPaths: []), stateDirectory: dir.path,
                                   maxStreams: 4, workerThreads: 2, workflows: nil)
        // As the route opens it.
        let openedAt = try EventStream.latestSeq(store)
        #expect(openedAt > Int64(Self.files * 6))
        var cursor = StreamCursor(runID: "s", after: 0, filesThrough: openedAt, visibleAtOpen: openedAt)
        var text = ""
        func read() async throws -> Bool {
            let (pieces, more) = try await cursor.next(services)
            for piece in pieces { text += String(buffer: piece) }
            return more
        }
        for _ in 0 ..< 100 where try await read() || cursor.last < openedAt {}
        #expect(cursor.last >= openedAt)
        // After it opened: one more file, and the session's end; those come, the file's too.
        try store.appendEvents(Self.file(Self.files) + [EventRecord(runID: "s", time: 5, type: .stepSucceeded, step: "accept"),
                                                         EventRecord(runID: "s", time: 5, type: .runFinished)])
        for _ in 0 ..< 200 where !text.contains("\"run.finished\"") {
            _ = try await read()
            try await Task.sleep(for: .milliseconds(20))
        }
        let journal = try store.storedEvents(runID: "s", afterSeq: 0, limit: 100_000)
        let wanted = journal.filter { !$0.isFileEvent || $0.seq > openedAt }
        // run.added, step.started, 4 step.progress; the new file's 5, and the end's 2.
        #expect(wanted.count == 13)
        #expect(Self.seqs(text) == wanted.map(\.seq), "\(text.suffix(2000))")

        // What the server read for it: about what it sent, not the 12,000 events journaled.
        let read = cursor.eventsRead + services.eventFeed.eventsRead
        #expect(read <= 4 * wanted.count, "read \(read) events (\(cursor.eventsRead) by the stream, \(services.eventFeed.eventsRead) by the feed) to send \(wanted.count)")
    }
}
