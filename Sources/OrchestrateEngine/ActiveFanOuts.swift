/// The `for_each` steps of a run that are under way, by declared step id, in the order they
/// started: when slots free up, the queued items of the oldest fan-out start first.
///
/// Invariant: `stepIDs` lists exactly the fan-outs under way, each once, oldest first.
struct ActiveFanOuts {
    private var byStep: [String: FanOut] = [:]
    /// The ids of `byStep`'s fan-outs, in the order they started.
    private(set) var stepIDs: [String] = []

    subscript(stepID: String) -> FanOut? { byStep[stepID] }

    /// A fan-out under way from now on (or again, on resume); one already under way stays in its place.
    mutating func add(_ fanOut: FanOut, for stepID: String) {
        if byStep.updateValue(fanOut, forKey: stepID) == nil { stepIDs.append(stepID) }
    }

    /// The fan-out of `stepID` finished.
    mutating func remove(_ stepID: String) {
        guard byStep.removeValue(forKey: stepID) != nil else { return }
        stepIDs.removeAll { $0 == stepID }
    }
}
