// The user's remotes file, `$XDG_CONFIG_HOME/orchestrate/remotes.yaml` (else
// `~/.config/orchestrate/remotes.yaml`): named connections any workflow, `copy` and `remote`
// can use. It names servers and where their secrets come from, so, like a token file, it is
// used only when it belongs to the user and no one else may read or write it (0600).
import Foundation
import OrchestrateModel
import OrchestrateStore

public struct RemotesFile: RemoteDefinitions {
    public let path: String

    public init(path: String) { self.path = path }

    /// The file the environment points at (`XDG_CONFIG_HOME`, else `HOME`).
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let config: String
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            config = xdg
        } else {
            config = (environment["HOME"] ?? NSHomeDirectory()) + "/.config"
        }
        path = config + "/orchestrate/remotes.yaml"
    }

    /// A larger file is refused rather than read: remotes are a few lines each.
    static let maximumSize = 1 << 20

    /// The remotes; a missing file is no remotes.
    public func userRemotes() -> Result<RemoteCatalog, RemotesUnavailable> {
        let data: Data
        do {
            guard let read = try OwnedState.read(path, as: .remotesFile, atMost: Self.maximumSize) else {
                return .success(RemoteCatalog())
            }
            data = read
        } catch {
            return .failure(RemotesUnavailable(reason: error.description))
        }
        guard let text = String(data: data, encoding: .utf8) else {
            return .failure(RemotesUnavailable(reason: "the remotes file \(path) is not valid UTF-8 text"))
        }
        do {
            return .success(try RemoteCatalog.parse(source: text, file: path))
        } catch {
            return .failure(RemotesUnavailable(reason: "the remotes file \(path) has errors", diagnostics: error.diagnostics))
        }
    }
}
