import Foundation
import OrchestrateEngine
import OrchestrateExactPath
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

/// `serve`'s watch of one folder (a workflow's `on.watch`), on its own thread: finds files
/// (a scan at start, so files that arrived while nothing watched are picked up; inotify
/// afterwards, with a periodic scan as a safety net, or scanning alone where inotify is
/// unavailable or `pollOnly`), waits for each to settle, hands it over exactly once, and
/// applies `after:` once its work succeeded.
///
/// ```swift
/// let watcher = try FolderWatcher(watched: WatchedFolder(workflow: wf), store: store, options: .init())
/// watcher.start()
/// // ...
/// watcher.stop()
/// ```
public final class FolderWatcher: @unchecked Sendable {
    public struct Options: Sendable {
        /// The queue the watch's runs go to (the first queue `serve` serves).
        public var queue = "default"
        /// Scan only (no inotify): for network file systems, where inotify does not see
        /// other machines' writes.
        public var pollOnly = false
        /// Between scans when inotify watches the folder: a safety net.
        public var scanIntervalWithInotify: Double = 30
        /// Between scans without inotify (capped by half the settle time).
        public var scanIntervalAlone: Double = 2
        /// How often the outcome of handed-over work is looked at (for `after:`).
        public var outcomeInterval: Double = 1
        /// The most files waiting to settle that are tracked at once; more are taken in by a
        /// scan once half of them were handed over (`SettleTracker`).
        public var filesWaitingAtOnce = SettleTracker.defaultCapacity
        /// A watch making a run per file holds back while this many of its hand-offs are pending
        /// (runs queued, running, or their `after:` not applied yet): a flood of files waits in
        /// the folder, not as that many runs in the queue.
        public var pendingRunsAtOnce = FolderWatcher.defaultPendingRuns
        public var environment: [String: String] = ProcessInfo.processInfo.environment
        public var warn: @Sendable (String) -> Void = { _ in }

        public init() {}
    }

    public let watched: WatchedFolder
    private let options: Options
    private let handOver: WatchHandOver
    private let observer: (any RunObserver)?
    private let stopped = NSCondition()
    private var stopping = false
    private var running = false

    /// Reads the watch's journal of hand-offs; throws if the store cannot be read.
    public init(watched: WatchedFolder, store: any StateStore, options: Options, observer: (any RunObserver)? = nil) throws {
        self.watched = watched
        self.options = options
        self.observer = observer
        handOver = try WatchHandOver(watched: watched, store: store, queue: options.queue, environment: options.environment)
    }

    /// Versions held as handed over or refused (read once stopped: the watch's thread owns them).
    var heldVersions: Int { handOver.heldVersions }
    /// Scans of the whole folder, and of folders inotify reported new (read once stopped).
    private(set) var fullScans = 0
    private(set) var folderScans = 0

    public func start() {
        stopped.withLock { running = true }
        let thread = Thread { [self] in
            loop()
            stopped.withLock {
                running = false
                stopped.broadcast()
            }
        }
        thread.name = "watch \(watched.folder)"
        thread.start()
    }

    /// Stops watching; returns once the thread is done (within a quarter of a second or so).
    public func stop() {
        stopped.withLock {
            stopping = true
            while running { stopped.wait() }
        }
    }

    private var isStopping: Bool { stopped.withLock { stopping } }

    /// The most files handed over between two looks at inotify and at the work's outcomes.
    static let handOverBatch = 256
    /// 10,000: a night's deliveries of whole files, and a sequence's frames taken in faster than
    /// any queue runs them, while a million files dropped at once do not become a million runs.
    public static let defaultPendingRuns = 10_000

    private func loop() {
        let settle = Double(watched.trigger.settle.components.seconds)
            + Double(watched.trigger.settle.components.attoseconds) / 1e18
        var tracker = SettleTracker(settle: settle, capacity: options.filesWaitingAtOnce)
        let filter = watched.filter
        let inotify = options.pollOnly ? nil : InotifyWatch(root: watched.folder)
        let scanAlone = max(0.1, min(options.scanIntervalAlone, settle / 2))
        var scanInterval = inotify == nil ? scanAlone : options.scanIntervalWithInotify
        var nextScan = 0.0
        var nextOutcomes = 0.0
        var unreadableNames = 0  // as many as the last scan met: said again only when it changes
        var saidGivenUp = false  // files that kept changing gave their places up: said once
        var rootMissing = false  // the watched folder could not be opened at the last scan
        // The store failing (down, restarting, cut off): said once when it starts and once when it
        // ends, and hand-overs wait `storeBackoff` (1 s, doubling to 30 s) between tries, so an
        // outage of an hour with thousands of files waiting neither floods the log nor keeps this
        // thread in one connection timeout after another.
        var storeFailing = false
        var storeRetryAt = 0.0
        var heldBackUntil = 0.0  // pending runs at `pendingRunsAtOnce`: looked at again then
        var saidHeldBack = false  // said once a backlog, not at every run that ends in it
        let makesRuns: Bool
        if case .runs = watched.trigger.work { makesRuns = true } else { makesRuns = false }
        var storeBackoff = 1.0
        func storeAnswered() {
            guard storeFailing else { return }
            storeFailing = false
            storeBackoff = 1
            options.warn("watch \(watched.folder): the state store answers again; hand-overs go on")
        }
        func storeFailed(_ what: String, _ error: any Error, at now: Double) {
            if !storeFailing {
                options.warn("watch \(watched.folder): could not \(what) (\(error)); trying again, quietly, until the store answers")
            }
            storeFailing = true
            storeRetryAt = now + storeBackoff
            storeBackoff = min(storeBackoff * 2, 30)
        }
        func clock() -> Double { MonotonicClock.nowSeconds() }

        func look(_ relative: String, now: Double) {
            guard let signature = FileSignature.of(root: watched.folder, relative: relative) else {
                tracker.forget(relative)  // gone (deleted, moved out) before it settled: never handed over
                return
            }
            if handOver.isSettledWith(handOver.key(relative, signature)) {
                tracker.forget(relative)
            } else {
                tracker.observe(relative, signature, now: now)
            }
        }

        while !isStopping {
            var now = clock()
            if now >= nextScan {
                fullScans += 1
                var stillThere = Set<ExactPath>()  // the waiting files this pass met; the others are gone
                var settledThere = FileVersionSet()  // the settled versions it met; the others are gone
                tracker.clearMissed()
                var unreadable: (count: Int, first: String?) = (0, nil)
                var rootError: (any Error)?
                let folders = filter.scan(entering: { inotify?.watch([$0]) },
                                          unreadable: { unreadable = (unreadable.count + 1, unreadable.first ?? $0) },
                                          rootFailed: { rootError = $0 }) { relative, signature in
                    let file = handOver.key(relative, signature)
                    if handOver.isSettledWith(file) {
                        tracker.forget(relative)
                        settledThere.insert(file)
                    } else {
                        tracker.observe(relative, signature, now: now)
                        if tracker.isTracked(relative) { stillThere.insert(ExactPath(relative)) }
                    }
                }
                if let inotify, !inotify.watch(folders) { scanInterval = scanAlone }
                for relative in tracker.paths where !stillThere.contains(ExactPath(relative)) { tracker.forget(relative) }
                handOver.keepSettledVersions(settledThere)
                if unreadable.count != unreadableNames, let first = unreadable.first {
                    options.warn("watch \(watched.folder): \(unreadable.count) name(s) there are not UTF-8 and are left alone, e.g. "
                        + "\(first): rename them to have them handed over")
                }
                unreadableNames = unreadable.count
                // A watched folder that went away (an unmounted share, a rename) is said once, and
                // once when it is back: silence would look like a quiet night.
                if let rootError, !rootMissing {
                    options.warn("watch \(watched.folder): the watched folder cannot be opened (\(rootError)); nothing is handed "
                        + "over until it can")
                } else if rootError == nil && rootMissing {
                    options.warn("watch \(watched.folder): the watched folder can be opened again; watching it")
                }
                rootMissing = rootError != nil
                nextScan = now + (rootMissing ? scanAlone : scanInterval)  // inotify cannot say when it is back
            }
            var room = Self.handOverBatch
            if makesRuns && now >= storeRetryAt && now >= heldBackUntil && tracker.nextDue.map({ $0 <= now }) == true {
                do {
                    room = min(room, options.pendingRunsAtOnce - (try handOver.store.pendingHandOffCount(watch: watched.identity)))
                    storeAnswered()
                } catch {
                    storeFailed("count the runs waiting", error, at: now)
                }
                if room <= 0 {
                    heldBackUntil = now + 1
                    if !saidHeldBack {
                        options.warn("watch \(watched.folder): \(options.pendingRunsAtOnce) runs of this watch wait already; the "
                            + "other files stay in the folder and are handed over as runs end")
                    }
                    saidHeldBack = true
                } else if room >= options.pendingRunsAtOnce / 2 {
                    saidHeldBack = false  // said again only for a backlog that came after this one cleared
                }
            }
            let takeNow = now >= storeRetryAt && now >= heldBackUntil && room > 0
            for (relative, seen) in takeNow ? tracker.due(now: now, limit: room) : [] {
                let current = FileSignature.of(root: watched.folder, relative: relative)
                guard current == seen else {
                    tracker.observe(relative, current, now: now)  // changed again (or gone): wait on
                    continue
                }
                tracker.forget(relative)
                do {
                    for event in try handOver.handOver(relative, seen) { observer?.runEvent(event) }
                    storeAnswered()
                } catch let refusal as WatchHandOver.Refusal {
                    options.warn("watch \(watched.folder): not handing over \(relative): \(refusal)")
                } catch {
                    storeFailed("hand over \(relative)", error, at: now)
                    tracker.observe(relative, seen, now: now)
                    break  // the others wait for the next try
                }
            }
            if now >= nextOutcomes && now >= storeRetryAt {
                do {
                    try handOver.settleOutcomes { observer?.runEvent($0) }
                    storeAnswered()
                } catch let failed as WatchHandOver.AfterFailed {
                    options.warn("watch \(watched.folder): could not apply 'after' to \(failed)")
                } catch {
                    storeFailed("apply 'after'", error, at: now)
                }
                nextOutcomes = now + options.outcomeInterval
            }
            // Files were left out while the tracker was full: once half of it is free, a scan
            // takes them in.
            if tracker.missedSome && tracker.count <= tracker.capacity / 2 { nextScan = 0 }
            if tracker.givenUp > 0 && !saidGivenUp {
                saidGivenUp = true
                options.warn("watch \(watched.folder): all \(tracker.capacity) places for files waiting to settle were taken, and files "
                    + "that kept changing for over \(Int(tracker.holdLimit)) s gave theirs up to newer ones (a later scan meets them again)")
            }
            now = clock()
            let wake = min(tracker.nextDue.map { max($0, storeRetryAt, heldBackUntil) } ?? .infinity, max(nextOutcomes, storeRetryAt),
                           nextScan, now + 0.25)
            let timeout = max(0.01, wake - now)
            if let inotify {
                switch inotify.wait(timeout: timeout) {
                case .paths(let files, let newFolders)?:
                    let seenAt = clock()
                    for relative in files where filter.matches(relative.string) { look(relative.string, now: seenAt) }
                    let starts = newFolders.map(\.string).filter(filter.entersFolder)
                    if !starts.isEmpty {
                        folderScans += 1
                        // Each watched before it is read: a file made in one meanwhile is heard,
                        // not left to the next scan of everything.
                        _ = filter.scan(below: starts, entering: { inotify.watch([$0], again: true) }) { relative, signature in
                            if handOver.isSettledWith(handOver.key(relative, signature)) {
                                tracker.forget(relative)
                            } else {
                                tracker.observe(relative, signature, now: seenAt)
                            }
                        }
                    }
                case .rescan?:
                    nextScan = 0
                case nil:
                    break
                }
            } else {
                Thread.sleep(forTimeInterval: timeout)
            }
        }
    }
}
