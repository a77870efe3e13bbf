import Foundation
import OrchestrateModel

/// Resolves a workflow's secrets from the environment or their files. Done again at every
/// attempt, so a rotated token is picked up; the values are never written anywhere.
public enum SecretResolver {
    public struct Resolution: Sendable {
        public var values: [String: String]
        public var missing: [SecretDeclaration]
        /// Why each missing secret has no value, by name.
        public var reasons: [String: String] = [:]

        /// "remotes.yaml:4:20: secret 'x' needs the environment variable X, which is not set", one per missing secret.
        public var messages: [String] {
            missing.map { "\($0.location): \(reasons[$0.name] ?? "\($0.displayName) has no value")" }
        }
    }

    public static func resolve(_ declarations: [SecretDeclaration], environment: [String: String]) -> Resolution {
        var resolution = Resolution(values: [:], missing: [])
        for declaration in declarations {
            switch declaration.source {
            case .environment(let variable):
                if let value = environment[variable], !value.isEmpty {
                    resolution.values[declaration.name] = value
                } else {
                    resolution.missing.append(declaration)
                    resolution.reasons[declaration.name] =
                        "\(declaration.displayName) needs the environment variable \(variable), which is not set"
                }
            case .file(let path):
                switch SecretFile.read(path, environment: environment) {
                case .success(let value):
                    resolution.values[declaration.name] = value
                case .failure(let why):
                    resolution.missing.append(declaration)
                    resolution.reasons[declaration.name] = "\(declaration.displayName) is read from \(path), which \(why.description)"
                }
            }
        }
        return resolution
    }
}
