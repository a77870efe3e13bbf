// "did you mean …?" for misspelt field names, step types, functions, inputs and steps.

/// The candidate closest to `word` when it is plausibly a typo of it, else nil.
///
///     closestMatch(to: "retires", in: ["retry", "timeout"])   // "retry"
///     closestMatch(to: "destination", in: ["dest", "url"])     // "dest"
///     closestMatch(to: "zzz", in: ["retry"])                  // nil
public func closestMatch<S: Sequence>(to word: String, in candidates: S) -> String? where S.Element == String {
    let lowered = Array(word.lowercased().unicodeScalars)
    var best: (name: String, distance: Int)?
    for candidate in candidates {
        let c = Array(candidate.lowercased().unicodeScalars)
        let distance = editDistance(lowered, c)
        let longer = max(lowered.count, c.count)
        // Allow roughly one edit per three characters, and always one (so "wtih" finds "with").
        let allowed = max(1, (longer + 1) / 3 + 1)
        guard distance <= allowed, distance < longer else { continue }
        if best == nil || distance < best!.distance { best = (candidate, distance) }
    }
    return best?.name ?? abbreviationMatch(word, candidates)
}

/// The one candidate that `word` abbreviates or spells out ("destination" for "dest", "dest"
/// for "destination"): a prefix of at least three characters, either way. Nil when none or
/// several are.
private func abbreviationMatch<S: Sequence>(_ word: String, _ candidates: S) -> String? where S.Element == String {
    let w = word.lowercased()
    let found = candidates.filter { candidate in
        let c = candidate.lowercased()
        return min(c.count, w.count) >= 3 && c != w && (c.hasPrefix(w) || w.hasPrefix(c))
    }
    return found.count == 1 ? found[0] : nil
}

/// "; did you mean 'x'?" or "", ready to append to a message.
func didYouMean<S: Sequence>(_ word: String, _ candidates: S) -> String where S.Element == String {
    closestMatch(to: word, in: candidates).map { "; did you mean '\($0)'?" } ?? ""
}

/// Levenshtein distance with adjacent transpositions counting as one edit ("wtih" → "with").
func editDistance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous2 = [Int](repeating: 0, count: b.count + 1)
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                current[j] = min(current[j], previous2[j - 2] + 1)
            }
        }
        (previous2, previous, current) = (previous, current, previous2)
    }
    return previous[b.count]
}

/// "'a', 'b' or 'c'" for messages.
func quotedList(_ names: [String], conjunction: String = "or") -> String {
    let quoted = names.map { "'\($0)'" }
    guard quoted.count > 1 else { return quoted.first ?? "" }
    return quoted.dropLast().joined(separator: ", ") + " \(conjunction) " + quoted.last!
}
