import Foundation
import OrchestratePluginHost
import OrchestrateTestSupport
import Testing

/// A plugin is loaded only if nobody but root and the current user could have replaced it:
/// the file and every directory above it belong to root or to us, and none is writable by
/// others or by a group other than root's (the tests run as root; `nobody` is the other user).
@Suite(.serialized) struct PluginOwnershipTests {
    static let nobody: uid_t = 65534
    static let nogroup: gid_t = 65534

    /// base/outer/inner/p.so, a copy of the probe plugin, all ours and 0755.
    func installed() throws -> (base: TemporaryDirectory, outer: String, inner: String, plugin: String) {
        let base = TemporaryDirectory()
        let inner = base.url.appendingPathComponent("outer/inner")
        try FileManager.default.createDirectory(at: inner, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let plugin = inner.appendingPathComponent("p.so").path
        try FileManager.default.copyItem(atPath: try Fixtures.path("hostprobe"), toPath: plugin)
        let real = URL(fileURLWithPath: plugin).resolvingSymlinksInPath()
        return (base, real.deletingLastPathComponent().deletingLastPathComponent().path, real.deletingLastPathComponent().path, real.path)
    }

    func refusal(_ plugin: String) -> String? {
        do {
            _ = try PluginLoader.load(path: plugin)
            return nil
        } catch {
            return error.reason
        }
    }

    @Test func aLibraryOfAnotherUserIsRefused() throws {
        let (base, _, _, plugin) = try installed()
        _ = base
        #expect(chown(plugin, Self.nobody, Self.nogroup) == 0)
        #expect(refusal(plugin) == "the file belongs to nobody (uid 65534), neither root nor the current user root (uid 0) "
            + "(that user could replace the plugin's code); install it as root, or fix with chown 0 \(plugin)")
        #expect(chown(plugin, 0, 0) == 0)
        #expect(refusal(plugin) == nil)
    }

    @Test func aDirectoryOfAnotherUserAnywhereAboveIsRefused() throws {
        let (base, outer, inner, plugin) = try installed()
        _ = base
        #expect(chown(outer, Self.nobody, Self.nogroup) == 0)
        #expect(refusal(plugin) == "its directory \(outer) belongs to nobody (uid 65534), neither root nor the current user "
            + "root (uid 0) (that user could replace the plugin's code); install it as root, or fix with chown 0 \(outer)")
        #expect(chown(outer, 0, 0) == 0 && chown(inner, Self.nobody, Self.nogroup) == 0)
        #expect(refusal(plugin)?.hasPrefix("its directory \(inner) belongs to nobody (uid 65534)") == true)
    }

    @Test func aDirectoryAGroupCanWriteIsRefusedUnlessItIsRoots() throws {
        let (base, outer, _, plugin) = try installed()
        _ = base
        #expect(chmod(outer, 0o775) == 0 && chown(outer, 0, Self.nogroup) == 0)
        #expect(refusal(plugin) == "it is in the directory \(outer), writable by group nogroup (gid 65534) (its members could "
            + "replace it); move it, or fix with chmod g-w \(outer)")
        #expect(chown(outer, 0, 0) == 0 && chmod(plugin, 0o775) == 0 && chown(plugin, 0, Self.nogroup) == 0)
        #expect(refusal(plugin) == "the file is writable by group nogroup (gid 65534) (its members could replace its code); "
            + "fix with chmod g-w \(plugin)")
        // Group-writable by root's group (gid 0), the directory and the file: accepted.
        #expect(chown(plugin, 0, 0) == 0)
        #expect(refusal(plugin) == nil)
    }

    @Test func aWorldWritableAncestorIsRefused() throws {
        let (base, outer, _, plugin) = try installed()
        _ = base
        #expect(chmod(outer, 0o777) == 0)
        #expect(refusal(plugin) == "it is in the world-writable directory \(outer) (anyone could replace it); "
            + "move it, or fix with chmod o-w \(outer)")
    }
}
