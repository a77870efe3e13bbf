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
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return .success(RemoteCatalog()) }
            return .failure(RemotesUnavailable(reason: "cannot open the remotes file \(path): \(String(cString: strerror(errno)))"))
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        do {
            try OwnedState.check(descriptor: fd, path: path, as: .remotesFile)
        } catch {
            return .failure(RemotesUnavailable(reason: error.description))
        }
        let data: Data
        do {
            data = try handle.read(upToCount: Self.maximumSize + 1) ?? Data()
        } catch {
            return .failure(RemotesUnavailable(reason: "cannot read the remotes file \(path): \(error.localizedDescription)"))
        }
        guard data.count <= Self.maximumSize else {
            return .failure(RemotesUnavailable(reason: "the remotes file \(path) is larger than 1 MiB"))
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
