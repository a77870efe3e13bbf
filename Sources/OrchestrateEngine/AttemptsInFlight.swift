/// The attempts a run has in flight, by instance id, and among them those journaled in the
/// current round, whose threads start only once the round is committed (`takeToLaunch`).
///
/// Each attempt carries a token from `newToken`. A result is taken only from the attempt that
/// is current for its instance: the late result of an abandoned attempt (a plugin that ignored
/// its cancellation and returned after all) changes nothing.
///
/// Invariants: at most one attempt per instance; tokens only grow; an attempt waiting for its
/// launch is in flight already (it counts against `--max-parallel` and is cancelled with the
/// others).
struct AttemptsInFlight {
    /// Every attempt in flight, by the id of its instance.
    private(set) var byInstance: [String: Attempt] = [:]
    private var toLaunch: [(Instance, Attempt)] = []
    private var lastToken = 0

    var count: Int { byInstance.count }

    /// No attempt is in flight (nor waiting for its launch).
    var isEmpty: Bool { byInstance.isEmpty && toLaunch.isEmpty }

    /// The token for the next attempt.
    mutating func newToken() -> Int {
        lastToken += 1
        return lastToken
    }

    /// `attempt` of `instance` is journaled in this round: in flight, launched after the commit.
    mutating func add(_ attempt: Attempt, of instance: Instance) {
        byInstance[instance.id] = attempt
        toLaunch.append((instance, attempt))
    }

    /// The attempt `completion` reports on, no longer in flight; nil, changing nothing, when
    /// that attempt is not the instance's current one.
    mutating func complete(_ completion: Completion) -> Attempt? {
        guard let attempt = byInstance[completion.instanceID], attempt.token == completion.token else { return nil }
        byInstance.removeValue(forKey: completion.instanceID)
        return attempt
    }

    /// The attempts added since the last call, to launch now that their journal is committed.
    mutating func takeToLaunch() -> [(Instance, Attempt)] {
        defer { toLaunch.removeAll() }
        return toLaunch
    }
}
