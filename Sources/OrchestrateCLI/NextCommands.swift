import OrchestrateStore

/// The commands a person types next about a run (`orchestrate resume RUN`, `cancel`, `retry`),
/// written out in full: with the `--state`, `--store`, `--node` and `--plugin-path` this command
/// was given, so that pasting one acts on the same run. A `--store` URL is shown redacted (a
/// password never reaches the terminal; it belongs in a password file anyway).
enum NextCommands {
    static func command(_ verb: String, _ runID: String, _ global: GlobalOptions) -> String {
        var words = ["orchestrate", verb, runID]
        if let state = global.stateDirectory { words += ["--state", state] }
        if global.store != nil, let location = try? global.storeLocation() { words += ["--store", location.redacted] }
        if let node = global.node { words += ["--node", node] }
        for path in global.pluginPaths { words += ["--plugin-path", path] }
        return words.map(quoted).joined(separator: " ")
    }

    /// What to do with a run left unfinished by an interrupt: continue it, or undo it.
    static func afterInterrupt(_ run: RunRecord, _ global: GlobalOptions) -> [String] {
        let undone = run.status == .compensating
            ? "or cancel it (its compensations continue, then it ends cancelled):"
            : "or undo what it did (its compensations run, then it ends cancelled):"
        return [
            "run \(run.id) interrupted; \(run.status == .compensating ? "its compensations are not finished" : "nothing was undone"). Continue it with:",
            "  " + command("resume", run.id, global),
            undone,
            "  " + command("cancel", run.id, global),
        ]
    }

    /// A word as the shell reads it back: quoted only when it has to be.
    static func quoted(_ word: String) -> String {
        let plain = word.allSatisfy { $0.isLetter || $0.isNumber || "-_./:=@+,%".contains($0) }
        if plain && !word.isEmpty { return word }
        return "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
