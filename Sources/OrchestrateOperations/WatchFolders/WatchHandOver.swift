import Foundation
import OrchestrateEngine
import OrchestrateExactPath
import OrchestrateJSON
import OrchestrateModel
import OrchestrateStore

/// Turns settled files of one watched folder into work, exactly once (the store journals each
/// hand-off in the transaction that creates the run or adds the item), and applies `after:` to
/// a file once its work succeeded — never before, and never to a file whose work failed.
final class WatchHandOver {
    /// The label runs made by a watch carry (its short id), so its feed run can be found again.
    static let label = "orchestrate.watch"

    let watched: WatchedFolder
    let store: any StateStore
    let queue: String
    let environment: [String: String]
    /// Versions handed over (by any process) still in the folder, so scans skip them without
    /// asking the store: one whose `after:` deleted or moved it is dropped, and a scan of the
    /// whole folder drops those it did not meet (`keepSettledVersions`).
    private var handedOver: FileVersionSet
    /// Versions whose inputs did not evaluate: warned about once, not retried until they change.
    private var refused = FileVersionSet()
    private var feedRunID: String?
    /// Succeeded hand-offs whose file `after:` found gone or changed once: recorded only if it
    /// is still so at the next look, since another serve may be applying `after:` to it right
    /// now (its record, with what it did, is the one to keep).
    private var foundGone = FileVersionSet()
    /// What `after:` did to a file found gone or changed.
    static let changedOrGone = "none: the file changed or is gone"
    /// Called before a file's `after:` action, and within it between its check of the file and
    /// the delete or move: where tests play another serve.
    var beforeAction: (WatchedFile) -> Void = { _ in }
    var betweenCheckAndAction: (WatchedFile) -> Void = { _ in }
    /// Hand-offs whose `after:` action failed (warned about once), with when to try again:
    /// 1 s after the first failure, doubling up to 5 min, so a file that keeps failing (a full
    /// disk) is not tried once a second for good.
    private var failingAfter: [WatchedFile: (next: Double, delay: Double)] = [:]
    /// Whether the journal was made durable (`syncJournal`) since the page of ended hand-offs
    /// being settled was read: a page read later may hold runs that ended after the sync.
    private var journalSyncedForPage = false

    init(watched: WatchedFolder, store: any StateStore, queue: String, environment: [String: String]) throws {
        self.watched = watched
        self.store = store
        self.queue = queue
        self.environment = environment
        // Files whose `after:` deleted or moved them are not in the folder to be met again (a
        // store written before `removed` existed recorded them as `done`).
        let removesFiles: Bool
        if case .keep = watched.trigger.after { removesFiles = false } else { removesFiles = true }
        handedOver = FileVersionSet()
        var after: WatchedFile?
        repeat {
            let page = try store.watchHandOffs(watch: watched.identity, after: after, limit: Self.startPage)
            largestStartRead = max(largestStartRead, page.count)
            for handOff in page where !(handOff.outcome == .removed || removesFiles && handOff.outcome == .done) {
                handedOver.insert(handOff.file)
            }
            after = page.count == Self.startPage ? page.last?.file : nil
        } while after != nil
    }

    /// Hand-offs read from the store at a time at the start.
    static let startPage = 1024
    /// The most hand-offs one store read at the start returned.
    private(set) var largestStartRead = 0

    func key(_ relative: String, _ signature: FileSignature) -> WatchedFile {
        WatchedFile(watch: watched.identity, path: relative, size: signature.size, mtimeNanoseconds: signature.mtimeNanoseconds)
    }

    /// Whether this version needs no (more) handing over.
    func isSettledWith(_ file: WatchedFile) -> Bool { handedOver.contains(file) || refused.contains(file) }

    /// After a scan of the whole folder, given the settled versions it met: forgets the others
    /// (files deleted or rewritten since, and the history read at the start), so what is held
    /// follows the folder's files, not every version it ever received. Should one come back
    /// (a folder unreadable for a scan), the store still knows it was handed over.
    func keepSettledVersions(_ met: FileVersionSet) {
        handedOver.formIntersection(met)
        refused.formIntersection(met)
    }

    /// Versions held as handed over or refused.
    var heldVersions: Int { handedOver.count + refused.count }
    /// Versions found gone once, waiting for a second look.
    var versionsFoundGone: Int { foundGone.count }

    /// Hands the file over. Returns the journaled events (none when another process had
    /// already handed this version over). Throws on store failures (the caller tries again)
    /// and `Refusal` when the file's inputs do not fit the workflow (not retried).
    func handOver(_ relative: String, _ signature: FileSignature) throws -> [EventRecord] {
        let file = key(relative, signature)
        let fileValue = fileContext(relative, signature)
        let work: WatchWork
        var events: [EventRecord] = []
        let now = Date().timeIntervalSince1970
        do {
            switch watched.trigger.work {
            case .runs(let inputs):
                let resolved = try resolveInputs(inputs, file: fileValue)
                let (run, runEvents) = try RunLauncher.record(watched.workflow, inputs: resolved, status: .queued, id: nil,
                                                          labels: [Self.label: watched.shortID], priority: 0, maxRate: nil,
                                                          queue: queue)
                work = .run(run, events: runEvents)
                events = runEvents
            case .feed(let step, _, let destinationTemplate):
                let runID = try feedRun()
                let destination = try destinationTemplate.evaluate(in: EvaluationContext(env: environment, file: fileValue))
                guard let destination = destination.stringValue, !destination.isEmpty else {
                    throw Refusal(message: "its destination is not a non-empty string (\(destination.jsonText))")
                }
                let value: JSONValue = ["source": fileValue["path"]!, "destination": .string(destination)]
                let id = "w-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
                let added = EventRecord(runID: runID, time: now, type: .itemAdded, step: step,
                                        data: ["item": .string(id), "value": value])
                work = .item(runID: runID, stepID: step, id: id, json: value.jsonText, event: added)
                events = [added]
            }
        } catch let refusal as Refusal {
            refused.insert(file)
            throw refusal
        } catch let error as EvaluationError {
            refused.insert(file)
            throw Refusal(message: error.description)
        }
        var data: [String: JSONValue] = ["watch": .string(watched.identity), "path": .string(relative),
                                         "size": .int(signature.size), "mtime_ns": .int(signature.mtimeNanoseconds)]
        if case .item(_, let step, let id, _, _) = work {
            data["step"] = .string(step)
            data["item"] = .string(id)
        }
        let handed = EventRecord(runID: work.runID, time: now, type: .watchHandedOver, data: .object(data))
        let mine = try store.handOver(file, as: work, events: [handed])
        handedOver.insert(file)
        return mine ? events + [handed] : []
    }

    /// A file's inputs could not be made: the message says why (with the workflow location).
    struct Refusal: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    /// `file` in expressions: `path` (absolute), `name`, `relative`, `dir` (absolute), `size`,
    /// `mtime` (seconds since 1970).
    private func fileContext(_ relative: String, _ signature: FileSignature) -> JSONValue {
        // Cut at "/" bytes: Foundation's path functions go by characters, and "sub/\u{301}x.mov"
        // (a combining mark after the slash) would be named whole, its folder one level up.
        let path = watched.folder + "/" + relative
        let cut = PathBytes.splitAtLastSlash(path)
        return ["path": .string(path), "name": .string(cut?.tail ?? relative),
                "relative": .string(relative), "dir": .string(cut?.head ?? watched.folder),
                "size": .int(signature.size), "mtime": .double(Double(signature.mtimeNanoseconds) / 1e9)]
    }

    private func resolveInputs(_ template: Template, file: JSONValue?) throws -> JSONValue {
        let value = try template.evaluate(in: EvaluationContext(env: environment, file: file))
        let resolved = Result { () throws(InputErrors) -> JSONValue in
            try watched.workflow.resolveInputs(strings: [:], json: value.objectValue ?? [:], currentDirectory: watched.folder)
        }
        switch resolved {
        case .success(let inputs): return inputs
        case .failure(let errors):
            throw Refusal(message: "\(watched.trigger.location): on.watch inputs do not fit the workflow: \(errors.description)")
        }
    }

    /// The watch's one long run for `feed:`: the unfinished one carrying its label, else a new
    /// one. Its id is derived from the watch and a generation number, so two processes creating
    /// it at once create one (the second's `createRun` finds the id taken and uses that run).
    private func feedRun() throws -> String {
        if let id = feedRunID, let run = try store.run(id), !run.status.isFinished { return id }
        for _ in 0..<3 {
            let runs = try store.listRuns(RunFilter(labels: [Self.label: watched.shortID]))
            if let open = runs.last(where: { !$0.status.isFinished }) {
                feedRunID = open.id
                return open.id
            }
            guard case .feed(_, let inputs, _) = watched.trigger.work else { break }
            let id = "watch-\(watched.shortID)-\(runs.count + 1)"
            let (run, events) = try RunLauncher.record(watched.workflow, inputs: try resolveInputs(inputs, file: nil), status: .queued,
                                                   id: id, labels: [Self.label: watched.shortID], priority: 0, maxRate: nil,
                                                   queue: queue)
            do {
                try store.createRun(run, events: events)
                feedRunID = id
                return id
            } catch StoreError.duplicateRun {
                continue  // another process made it first: use theirs
            }
        }
        throw Refusal(message: "could not create or find the feed run of watch \(watched.identity)")
    }

    // MARK: after

    /// Hand-offs read from the store at a time when looking at outcomes: what a pass holds,
    /// whatever the number pending (a feed run's hand-offs, up to one per file of the folder).
    static let outcomePage = 256
    /// The most hand-offs one store read of the last `settleOutcomes` pass returned.
    private(set) var largestOutcomeRead = 0

    /// Looks at the hand-offs whose work ended, a page at a time: a succeeded one gets its
    /// `after:` action, a failed one is left where it is; each recorded once (the store decides
    /// who records). Work still going on is not read at all (the store filters it out).
    ///
    /// An `after:` action that fails (EACCES, a full disk) leaves its hand-off pending, to be
    /// tried again later (from 1 s, doubling up to 5 min), and the others go on: one file
    /// cannot hold up every later one. The pass throws `AfterFailed` only for files that were
    /// not failing already, so the caller warns once per file.
    func settleOutcomes(now: Double = Date().timeIntervalSince1970, _ emit: (EventRecord) -> Void) throws {
        var after: WatchHandOff?
        var newlyFailing: [AfterFailed] = []
        var stillPending = Set<WatchedFile>()
        var goneAndPending = FileVersionSet()  // of `foundGone`, those this pass met still pending
        largestOutcomeRead = 0
        while true {
            let page = try store.endedHandOffs(watch: watched.identity, after: after, limit: Self.outcomePage)
            largestOutcomeRead = max(largestOutcomeRead, page.count)
            journalSyncedForPage = false
            for ended in page {
                let handOff = ended.handOff
                defer { if foundGone.contains(handOff.file) { goneAndPending.insert(handOff.file) } }
                if let failing = failingAfter[handOff.file] {
                    stillPending.insert(handOff.file)
                    if now < failing.next { continue }
                }
                do {
                    guard let runStatus = ended.runStatus else {
                        try finish(handOff, succeeded: false, reason: "its run was deleted").forEach(emit)
                        continue
                    }
                    let succeeded = handOff.itemID == nil ? runStatus == .succeeded : ended.itemStatus == .done
                    try finish(handOff, succeeded: succeeded,
                               reason: succeeded ? nil : "its \(handOff.itemID == nil ? "run" : "item") did not succeed").forEach(emit)
                    failingAfter.removeValue(forKey: handOff.file)
                } catch let failed as AfterFailed {
                    let delay = min(300, (failingAfter[failed.file]?.delay ?? 0.5) * 2)
                    if failingAfter[failed.file] == nil { newlyFailing.append(failed) }
                    failingAfter[failed.file] = (now + delay, delay)
                    stillPending.insert(failed.file)
                }
            }
            guard page.count == Self.outcomePage, let last = page.last else { break }
            after = last.handOff
        }
        // Finished by another serve, or gone with their runs: nothing to try again, nothing to
        // look at again (the other serve's record is the one kept).
        failingAfter = failingAfter.filter { stillPending.contains($0.key) }
        foundGone.formIntersection(goneAndPending)
        if let first = newlyFailing.first {
            throw AfterFailed(file: first.file, description: first.description
                + (newlyFailing.count > 1 ? " (and \(newlyFailing.count - 1) more file(s))" : "") + "; tried again later, less and less often")
        }
    }

    /// An `after:` action that failed for one file; its hand-off stays pending.
    struct AfterFailed: Error, CustomStringConvertible {
        let file: WatchedFile
        let description: String
    }

    private func finish(_ handOff: WatchHandOff, succeeded: Bool, reason: String?) throws -> [EventRecord] {
        var data: [String: JSONValue] = ["watch": .string(watched.identity), "path": .string(handOff.file.path),
                                         "succeeded": .bool(succeeded)]
        if let item = handOff.itemID { data["item"] = .string(item) }
        var outcome: WatchHandOff.Outcome = succeeded ? .done : .left
        if succeeded {
            let action: String, destination: String?
            do {
                try syncJournalBeforeRemoving()
                beforeAction(handOff.file)
                (action, destination) = try applyAfter(handOff.file)
            } catch {
                throw AfterFailed(file: handOff.file, description: "\(handOff.file.path): \(error)")
            }
            // Gone: another serve may have just deleted or moved it, and its record says so;
            // this one waits for the next look.
            if action == Self.changedOrGone && foundGone.insert(handOff.file) { return [] }
            foundGone.remove(handOff.file)
            if action == "delete" || action == "move-to" {
                handedOver.remove(handOff.file)  // gone from the folder: no scan meets it again
                outcome = .removed  // so the hand-off may go with its run
            }
            data["after"] = .string(action)
            if let destination { data["to"] = .string(destination) }
        } else {
            data["after"] = "left"
            if let reason { data["reason"] = .string(reason) }
        }
        let event = EventRecord(runID: handOff.runID, time: Date().timeIntervalSince1970, type: .watchFinished,
                                data: .object(data))
        return try store.finishHandOff(handOff.file, outcome: outcome, events: [event]) ? [event] : []
    }

    /// Before the first delete or move of each page of ended hand-offs, the journal is made
    /// durable, once: the ends of the runs that succeeded were committed at the store's sync
    /// level, which for SQLite's default (NORMAL) a power cut can roll back. A file deleted on
    /// the strength of a run's end that is then rolled back would leave the run to start its
    /// steps again on a file no longer there. One fsync a page (of up to `outcomePage`), only
    /// when there is something to remove.
    private func syncJournalBeforeRemoving() throws {
        if case .keep = watched.trigger.after { return }
        guard !journalSyncedForPage else { return }
        do {
            try store.syncJournal()
        } catch {
            throw FolderDescriptors.Failed(description: "cannot make the journal durable first: \(error)")
        }
        journalSyncedForPage = true
    }

    /// Applies `after:` to the file if it is still the version that was handed over (a file
    /// replaced since is a new version, with its own hand-off). Returns what was done.
    ///
    /// On descriptors (`FolderDescriptors`): the folders between the watched folder and the file
    /// are entered without following links, and the file is checked and then deleted or moved
    /// in the folder that was opened. A subfolder someone swapped for a link to /etc after the
    /// hand-over leaves the file alone ("none: …"), where a path would have deleted or moved
    /// whatever the link reached.
    private func applyAfter(_ file: WatchedFile) throws -> (String, String?) {
        // By bytes: a "/" that a combining mark follows is still a "/" to the kernel.
        var folders = PathBytes.components(file.path, omittingEmpty: true)
        guard let name = folders.popLast() else { return (Self.changedOrGone, nil) }
        do {
            let root = try FolderDescriptors.open(watched.folder)
            defer { close(root) }
            let folder: Int32
            do {
                folder = try FolderDescriptors.descend(from: root, into: folders, creating: false, shown: file.path)
            } catch is FolderDescriptors.Missing {
                return (Self.changedOrGone, nil)  // its folder was renamed or deleted: the file with it
            }
            defer { close(folder) }
            var info = stat()
            guard fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                // Gone is an answer; anything else (EACCES, EIO, ENOMEM) is asked again later.
                guard errno == ENOENT || errno == ENOTDIR else {
                    throw FolderDescriptors.Failed(description: "cannot look at \(watched.folder)/\(file.path): \(String(cString: strerror(errno)))")
                }
                return (Self.changedOrGone, nil)
            }
            guard let now = FileSignature.of(info), key(file.path, now) == file else {
                return (Self.changedOrGone, nil)
            }
            betweenCheckAndAction(file)
            switch watched.trigger.after {
            case .keep:
                return ("keep", nil)
            case .delete:
                guard unlinkat(folder, name, 0) == 0 || errno == ENOENT else {
                    throw FolderDescriptors.Failed(description: "cannot delete \(watched.folder)/\(file.path): \(String(cString: strerror(errno)))")
                }
                return ("delete", nil)
            case .moveTo:
                let moveTo = watched.moveTo!
                let target = try moveToFolder(moveTo, root: root, folders: folders)
                defer { close(target) }
                var free = name
                if !Self.renameWithoutReplacing(folder, name, target, &free) {
                    // Gone since the look: another serve moved it first (its record says so).
                    if errno == ENOENT { return (Self.changedOrGone, nil) }
                    guard errno == EXDEV else {
                        throw FolderDescriptors.Failed(description: "cannot move \(watched.folder)/\(file.path) to \(moveTo): \(String(cString: strerror(errno)))")
                    }
                    // Another file system: copied, then removed, as `mv` does, named through the
                    // two folders' descriptors so neither can be swapped meanwhile (moveItem
                    // refuses an existing destination).
                    free = Self.freeName(name, in: target)
                    do {
                        try FileManager.default.moveItem(atPath: "/proc/self/fd/\(folder)/\(name)", toPath: "/proc/self/fd/\(target)/\(free)")
                    } catch {
                        var gone = stat()
                        if fstatat(folder, name, &gone, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT { return (Self.changedOrGone, nil) }
                        throw error
                    }
                }
                return ("move-to", ([moveTo] + folders + [free]).joined(separator: "/"))
            }
        } catch let refused as FolderDescriptors.Refused {
            // A folder replaced by a link, or one another user owns where only ours may be: the
            // file stays, and the hand-off says why.
            return ("none: \(refused.description)", nil)
        }
    }

    /// The folder a moved file goes to: `folders` below the move-to folder, made as needed. A
    /// move-to inside the watched folder is reached from it without following links, and it and
    /// its folders must be this user's (or root's): in a folder others write into, one made
    /// beforehand by someone else is theirs to fill with links.
    private func moveToFolder(_ moveTo: String, root: Int32, folders: [String]) throws -> Int32 {
        let inside = ExactPath(moveTo).hasPrefix(ExactPath(watched.folder + "/"))
        let base: Int32
        if inside {
            let relative = ExactPath(moveTo).dropping(ExactPath(watched.folder + "/"))
            base = try FolderDescriptors.descend(from: root, into: PathBytes.components(relative, omittingEmpty: true), creating: true,
                                                 owned: true, shown: moveTo)
        } else {
            base = try FolderDescriptors.open(moveTo)
        }
        defer { close(base) }
        return try FolderDescriptors.descend(from: base, into: folders, creating: true, owned: inside,
                                             shown: ([moveTo] + folders).joined(separator: "/"))
    }

    /// Renames `name` in `from` to `name`, or `name.1`, `name.2`… in `to`, whichever is free
    /// when the rename happens (`renameat2(RENAME_NOREPLACE)`: a file created there between a
    /// look and the rename is never overwritten); `free` is set to the name used. False with
    /// errno set when it failed (EXDEV: another file system). File systems without
    /// RENAME_NOREPLACE (EINVAL) get a look, then a plain rename.
    static func renameWithoutReplacing(_ from: Int32, _ name: String, _ to: Int32, _ free: inout String) -> Bool {
        var n = 0
        while true {
            let candidate = n == 0 ? name : "\(name).\(n)"
            guard let renameat2 = renameAt2 else { break }
            if renameat2(from, name, to, candidate, renameNoReplace) == 0 {
                free = candidate
                return true
            }
            if errno == EEXIST {
                n += 1
                continue
            }
            if errno != EINVAL && errno != ENOSYS { return false }
            break
        }
        free = freeName(name, in: to)
        return renameat(from, name, to, free) == 0
    }

    /// Whether this system's C library has `renameat2` (glibc 2.28 and later).
    static var hasRenameWithoutReplacing: Bool { renameAt2 != nil }

    /// `name`, or `name.1`, `name.2`… when taken in `folder`: a moved file never overwrites an
    /// earlier one.
    static func freeName(_ name: String, in folder: Int32) -> String {
        var candidate = name
        var n = 0
        var info = stat()
        while fstatat(folder, candidate, &info, AT_SYMLINK_NOFOLLOW) == 0 {
            n += 1
            candidate = "\(name).\(n)"
        }
        return candidate
    }
}

/// glibc's `renameat2` (2.28+), which Swift's Glibc module does not export: looked up at run time.
private typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
private let renameAt2: RenameAt2? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2").map { unsafeBitCast($0, to: RenameAt2.self) }
private let renameNoReplace: UInt32 = 1  // RENAME_NOREPLACE
