/// The secret values a run has resolved so far and the redactor that masks them.
///
/// Secrets are resolved from the environment at every attempt and never stored, and a value may
/// change between attempts (a rotated token): every value ever seen stays masked. Building a
/// `Redactor` sorts its secrets, so it is rebuilt only when an unseen value appears, not at every
/// attempt.
///
/// Invariant: `redactor` masks every value `learn` was given (empty ones aside, which mask
/// nothing).
struct SecretsSeen {
    private var values: Set<String> = []
    private(set) var redactor = Redactor(secrets: [String]())

    /// Adds `resolved` to the values to mask.
    mutating func learn(_ resolved: some Collection<String>) {
        guard !resolved.allSatisfy(values.contains) else { return }
        values.formUnion(resolved)
        redactor = Redactor(secrets: values)
    }
}
