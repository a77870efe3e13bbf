// `with: { remote: NAME }`: the remote's fields are merged into the step's inputs before
// anything checks them (the schema check, the host's check at every attempt), so a plugin never
// sees the word `remote`. A field the step gives itself wins. A field given by reference
// (`{ env: }`, `{ file: }`) becomes an implicit secret, `${{ secrets.__remote__NAME__FIELD }}`:
// resolved at every attempt, masked, and kept out of the store like any workflow secret.
import OrchestrateJSON

/// What the decoder knows about remotes while it reads one workflow.
struct RemoteScope {
    /// The workflow's own `remotes:` (they win over the user's by name).
    var workflow = RemoteCatalog()
    let user: (any RemoteDefinitions)?
    let catalog: (any StepCatalog)?
    /// The user's remotes once read (read at most once, and only if a step needs them).
    var userCatalog: Result<RemoteCatalog, RemotesUnavailable>?
    /// The secrets the remotes' references became, in the order first used.
    var secrets: [SecretDeclaration] = []
    /// The `with:` mappings whose remote was not merged in (an error was reported).
    var unexpanded: Set<SourceLocation> = []

    init(user: (any RemoteDefinitions)?, catalog: (any StepCatalog)?) {
        self.user = user
        self.catalog = catalog
    }

    static func secretName(remote: String, field: String) -> String { "__remote__\(remote)__\(field)" }
}

extension WorkflowDecoder {
    /// `with:`'s mapping with the named remote's fields merged in, or the mapping unchanged when
    /// it names none. Reports an unknown remote (with a did-you-mean), a remote of the wrong type,
    /// and a remotes file that cannot be used.
    mutating func expandRemote(_ node: YAMLNode, uses: String) -> YAMLNode {
        guard let pairs = node.pairs, let remotePair = pairs.first(where: { $0.name == "remote" }) else { return node }
        let rest = pairs.filter { $0.name != "remote" }
        remoteScope.unexpanded.insert(node.location)  // until the merge below succeeds
        guard let name = remotePair.value.stringValue, !name.contains("${{") else {
            reader.bag.error("'remote' must name a remote (a plain string, no expression), not \(remotePair.value.kindDescription)",
                             at: remotePair.value.location)
            return YAMLNode(kind: .mapping(rest), location: node.location)
        }
        guard let remote = lookUpRemote(name, at: remotePair.value.location) else {
            return YAMLNode(kind: .mapping(rest), location: node.location)
        }
        guard let wanted = RemoteType(stepType: uses) else {
            reader.bag.error("step type '\(uses)' takes no remote (remotes serve \(quotedList(RemoteType.allCases.map { "\($0.rawValue).*" })) steps)",
                             at: remotePair.key.location)
            return YAMLNode(kind: .mapping(rest), location: node.location)
        }
        guard wanted == remote.type else {  // "an": s3, sftp, ftp and http are read letter by letter
            reader.bag.error("step type '\(uses)' needs an \(wanted.rawValue) remote; '\(name)' is an \(remote.type.rawValue) remote "
                + "(defined at \(remote.location))", at: remotePair.value.location)
            return YAMLNode(kind: .mapping(rest), location: node.location)
        }
        let declared = remoteScope.catalog?.stepInfo(for: uses)?.inputSchema["properties"]?.objectValue.map { Set($0.keys) }
        var merged = rest
        for field in remote.fields where !rest.contains(where: { $0.name == field.name }) {
            if let declared, !declared.contains(field.name) { continue }  // sftp.connect takes no remote_root
            let key = YAMLNode(kind: .scalar(YAMLScalar(text: field.name, style: .plain, tag: nil)), location: field.location)
            switch field.value {
            case .literal:
                merged.append(YAMLPair(key: key, value: field.node))
            case .environment, .file:
                let secret = RemoteScope.secretName(remote: remote.name, field: field.name)
                if !remoteScope.secrets.contains(where: { $0.name == secret }) {
                    let source: SecretDeclaration.Source
                    switch field.value {
                    case .environment(let variable): source = .environment(variable)
                    case .file(let path): source = .file(path)
                    case .literal: continue
                    }
                    remoteScope.secrets.append(SecretDeclaration(
                        name: secret, source: source, location: field.location,
                        origin: "remote '\(remote.name)' (\(field.name))"))
                }
                let reference = YAMLNode(kind: .scalar(YAMLScalar(text: "${{ secrets.\(secret) }}", style: .doubleQuoted, tag: nil)),
                                         location: remotePair.value.location)
                merged.append(YAMLPair(key: key, value: reference))
            }
        }
        remoteScope.unexpanded.remove(node.location)
        return YAMLNode(kind: .mapping(merged), location: node.location)
    }

    /// The workflow's remote of that name, else the user's; nil after reporting why not.
    private mutating func lookUpRemote(_ name: String, at location: SourceLocation) -> Remote? {
        if let remote = remoteScope.workflow[name] { return remote }
        var userNames: [String] = []
        if let user = remoteScope.user {
            if remoteScope.userCatalog == nil {
                remoteScope.userCatalog = user.userRemotes()
                if case .failure(let unavailable) = remoteScope.userCatalog! {
                    for d in unavailable.diagnostics { reader.bag.error(d.message, at: d.location) }
                }
            }
            switch remoteScope.userCatalog! {
            case .success(let catalog):
                if let remote = catalog[name] { return remote }
                userNames = catalog.names
            case .failure(let unavailable):
                reader.bag.error("remote '\(name)' is not defined in this workflow, and the remotes file cannot be used: \(unavailable.reason)",
                                 at: location)
                return nil
            }
        }
        let known = remoteScope.workflow.names + userNames
        let where_ = remoteScope.user == nil ? "in this workflow's remotes:" : "in this workflow's remotes: or the remotes file"
        reader.bag.error("unknown remote '\(name)' (\(known.isEmpty ? "no remote is defined" : "not \(where_)"))"
            + didYouMean(name, known), at: location)
        return nil
    }

    /// The remotes' secrets added to the workflow's; a name taken by a declared secret is an error.
    mutating func addRemoteSecrets(into w: inout DecodedWorkflow) {
        for secret in remoteScope.secrets {
            if w.secrets.contains(where: { $0.name == secret.name }) {
                reader.bag.error("the secret name '\(secret.name)' is reserved for \(secret.displayName)", at: secret.location)
                continue
            }
            w.secrets.append(secret)
        }
    }
}
