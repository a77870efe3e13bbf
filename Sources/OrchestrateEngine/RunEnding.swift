import OrchestrateStore

/// Whether a run is on its way to an end other than success, and why: once a step fails (and
/// may not) or the run is cancelled, nothing new starts, what runs is cancelled, compensations
/// run, and the run ends with `status`.
///
/// Invariants: the ending is decided once (a later failure or cancel adds no second ending and
/// no second reason); compensation is entered once, and only by a run that is ending.
struct RunEnding {
    /// `.failed` or `.cancelled` once the run is ending; nil while it may still succeed.
    private(set) var status: RunStatus?
    /// Why the run failed, in order: its `error`, joined. Not only an ending's reason: a
    /// workflow output that does not evaluate fails a run whose steps all succeeded.
    private(set) var reasons: [String] = []
    /// The compensation phase began (its instances exist and are journaled).
    private(set) var compensationEntered = false

    init() {}

    /// The state a resumed run was left in: ending if it was compensating (compensations are
    /// re-entered, journaled ones continue), with the error it had.
    init(resuming run: RunRecord) {
        if run.status == .compensating { status = run.ending ?? .failed }
        if let error = run.error { reasons = [error] }
    }

    var isEnding: Bool { status != nil }

    /// The run's error: the reasons, joined; nil when there are none.
    var error: String? { reasons.isEmpty ? nil : reasons.joined(separator: "; ") }

    /// Decides that the run ends `status` because of `reason`. Returns false, recording nothing,
    /// when it was ending already: the first decision stands.
    mutating func begin(_ status: RunStatus, reason: String) -> Bool {
        guard self.status == nil else { return false }
        self.status = status
        reasons.append(reason)
        return true
    }

    /// One more reason the run failed (a failed compensation, an output that did not evaluate).
    mutating func addReason(_ reason: String) {
        reasons.append(reason)
    }

    /// Marks the compensation phase entered. True the first time, for a run that is ending;
    /// false after that, or while the run is not ending.
    mutating func enterCompensation() -> Bool {
        guard isEnding, !compensationEntered else { return false }
        compensationEntered = true
        return true
    }
}
