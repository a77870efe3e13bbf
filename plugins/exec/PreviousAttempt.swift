#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateJSON
import OrchestratePluginKit

/// The process group an attempt's command runs in, journaled as the step's checkpoint right
/// after it is spawned. The guard kills the group when the step's process dies; this record
/// covers the case where the guard died too (kill -9 of both, the OOM killer): the next attempt,
/// a retry or a resume, first ends what is left of the group (`PreviousAttempt.end`).
///
/// A pid, and so a group id, is reused once nothing uses it any more; the record tells the
/// original group from a later one with the leader's start time and the boot id. While a member
/// of the group lives, its id cannot be reused; if the leader's pid now names a process started
/// at another time, the original group is gone.
struct ProcessGroupRecord: Equatable {
    let processGroup: pid_t
    let leaderStart: UInt64
    let session: pid_t
    let bootID: String

    /// The group led by `child.pid` (the guard, alive and not yet reaped).
    init?(of child: SpawnedChild) {
        guard let leader = ProcessTable.entry(child.pid) else { return nil }
        self.init(processGroup: child.pid, leaderStart: leader.startTime, session: leader.session,
                  bootID: ProcessTable.bootID)
    }

    init(processGroup: pid_t, leaderStart: UInt64, session: pid_t, bootID: String) {
        self.processGroup = processGroup
        self.leaderStart = leaderStart
        self.session = session
        self.bootID = bootID
    }

    init?(checkpoint: JSONValue?) {
        guard let record = checkpoint?["exec_process_group"],
              let group = record["pgid"]?.intValue, let start = record["leader_start"]?.intValue,
              let session = record["session"]?.intValue, let boot = record["boot_id"]?.stringValue,
              group > 1, let group32 = pid_t(exactly: group), let session32 = pid_t(exactly: session)
        else { return nil }
        self.init(processGroup: group32, leaderStart: UInt64(clamping: start), session: session32, bootID: boot)
    }

    var checkpoint: JSONValue {
        ["exec_process_group": .object([
            "pgid": .int(Int64(processGroup)), "leader_start": .int(Int64(clamping: leaderStart)),
            "session": .int(Int64(session)), "boot_id": .string(bootID),
        ])]
    }

    /// The live processes still in the recorded group.
    func survivors(in table: [ProcessEntry] = ProcessTable.all()) -> [ProcessEntry] {
        guard bootID == ProcessTable.bootID, !bootID.isEmpty else { return [] } // a reboot ended them all
        if let leader = table.first(where: { $0.pid == processGroup }), leader.startTime != leaderStart {
            return [] // the pid was reused: the recorded group is gone
        }
        return table.filter {
            $0.isLive && $0.processGroup == processGroup && $0.session == session && $0.startTime >= leaderStart
        }
    }
}

enum PreviousAttempt {
    /// How long leftovers have to go after SIGKILL (only a process stuck in the kernel is slower).
    static let killTimeoutMilliseconds: Int64 = 10_000

    /// Journals `child`'s process group as the step's checkpoint (before the command can have
    /// done much: it is called right after spawning).
    static func record(_ child: SpawnedChild, in step: StepContext) {
        guard let record = ProcessGroupRecord(of: child), step.saveCheckpoint(json: record.checkpoint) else {
            step.log(.warn, "the command's process group \(child.pid) could not be journaled: if orchestrate and the "
                + "exec guard are both killed, a resumed attempt cannot end what is left of this one")
            return
        }
    }

    /// Kills what is left of the previous attempt's process group and waits until it is gone,
    /// so this attempt never runs beside an orphaned twin of itself.
    static func end(before step: StepContext) throws(StepError) {
        guard let record = ProcessGroupRecord(checkpoint: step.loadCheckpointJSON()) else { return }
        var survivors = record.survivors()
        guard !survivors.isEmpty else { return }
        step.log(.warn, "the previous attempt left \(survivors.count) process(es) running in process group "
            + "\(record.processGroup) (pids \(survivors.map { String($0.pid) }.joined(separator: " "))): sending SIGKILL")
        let deadline = Clock.milliseconds() + killTimeoutMilliseconds
        while !survivors.isEmpty {
            for survivor in survivors { kill(survivor.pid, SIGKILL) }
            if Clock.milliseconds() >= deadline {
                throw .retryable("processes left by the previous attempt in process group \(record.processGroup) "
                    + "(pids \(survivors.map { String($0.pid) }.joined(separator: " "))) did not end within "
                    + "\(killTimeoutMilliseconds / 1000) s of SIGKILL", code: "leftover_processes")
            }
            usleep(10_000)
            survivors = record.survivors()
        }
    }
}
