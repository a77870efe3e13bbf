import OrchestrateStore

/// The runs a list shows (`orchestrate list`, `GET /api/runs`), filtered by the status people
/// see (`RunDocument.effectiveStatus`): a run stored as running or compensating whose owner
/// died shows as interrupted. Every filter goes to the store, which reads through its indexes
/// up to the limit, so a list costs the same with a hundred runs or a million.
public enum RunListing {
    /// The runs of `filter` (its `statuses` are ignored) whose shown status is one of `statuses`
    /// (all when empty): the newest `filter.limit` of them, oldest first.
    public static func runs(_ store: any StateStore, statuses: Set<String>, filter: RunFilter) throws -> [RunRecord] {
        guard !statuses.isEmpty else {
            var all = filter
            all.statuses = nil
            return try store.listRuns(all)
        }
        // A stored status that always shows as itself: one read of the store each, newest
        // first up to the limit (one status per read keeps it on an index in its order).
        var reads: [Set<RunStatus>] = []
        // Runs stored as running or compensating show as interrupted when their owner died:
        // judged here, so read without a limit (they are the runs in progress, few).
        var judged: Set<RunStatus> = []
        for name in statuses {
            if name == "interrupted" {
                reads.append([.interrupted])
                judged.formUnion([.running, .compensating])
            } else if let status = RunStatus(rawValue: name) {
                if status == .running || status == .compensating { judged.insert(status) } else { reads.append([status]) }
            }
        }
        var found: [RunRecord] = []
        for read in reads {
            var one = filter
            one.statuses = read
            found += try store.listRuns(one)
        }
        if !judged.isEmpty {
            var inProgress = filter
            inProgress.statuses = judged
            inProgress.limit = nil
            found += try store.listRuns(inProgress).filter { statuses.contains(RunDocument.effectiveStatus($0)) }
        }
        found.sort { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
        if let limit = filter.limit { return Array(found.suffix(limit)) }
        return found
    }
}
