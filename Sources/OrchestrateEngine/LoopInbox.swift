import OrchestrateStore

/// What other threads hand a run's scheduling loop. It lives behind the executor's `signal`
/// lock; attempt threads, probes, `cancel()`, `interrupt(leaving:)`, `closeSessions()` and the
/// heartbeat write to it, the loop reads it once a round.
///
/// Two kinds of content, with different rules: messages (attempt results, events from plugin
/// callbacks, probe answers) are handed over once, by `takeRound`; requests (cancel, interrupt,
/// close, ownership lost) are states: once made, they stay.
struct LoopInbox {
    var completions: [Completion] = []
    var events: [EventRecord] = []
    var probeAnswers: [(Endpoint, String?)] = []
    var cancelRequested = false
    /// `orchestrate close`: long-lived steps finish their queued items and end.
    var closeRequested = false
    /// The status an interrupted run is left with (`.queued`, `.paused` or `.interrupted`).
    var interruptRequested: RunStatus?
    var ownershipLost = false
    /// Instances whose attempt the loop cancelled because the run is ending: their attempt
    /// threads read it (`attemptIsCancelled`), and their failure counts as `cancelled`.
    var cancelledInstances: Set<String> = []

    /// What the loop acts on in a round: the messages since the last round, now taken, and the
    /// standing requests.
    mutating func takeRound() -> (completions: [Completion], events: [EventRecord], cancel: Bool,
                                  interruptTo: RunStatus?, probeAnswers: [(Endpoint, String?)])
    {
        defer {
            completions.removeAll()
            events.removeAll()
            probeAnswers.removeAll()
        }
        return (completions, events, cancelRequested, interruptRequested, probeAnswers)
    }

    /// An attempt returned or a plugin sent an event: what the loop's brief spin looks for.
    var hasAttemptNews: Bool { !completions.isEmpty || !events.isEmpty }

    /// Whether the loop has work now instead of sleeping: a message, or a request it has not
    /// acted on yet. A cancel is acted on once the run is `ending`, an interrupt once it is
    /// `interrupting`; after that they no longer wake the loop (it would spin).
    func wakesLoop(ending: Bool, interrupting: Bool) -> Bool {
        hasAttemptNews || !probeAnswers.isEmpty || (cancelRequested && !ending)
            || (interruptRequested != nil && !interrupting)
    }
}
