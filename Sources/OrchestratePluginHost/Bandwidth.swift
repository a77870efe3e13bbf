#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateTokenBucket

/// Where a step's network bytes are accounted against bandwidth caps (the extension
/// `orchestrate.bandwidth.v1`). `reserve` debits the bytes at once and answers how long the
/// caller must wait before they may move; it never blocks, so the host can make the wait
/// cancellable.
public protocol BandwidthAccount: Sendable {
    /// Nanoseconds to wait before `bytes` may go (0: at once).
    func reserve(_ bytes: Int64) -> Int64
}

extension TokenBucket: BandwidthAccount {}

/// Several caps at once (the run's and the host's): the bytes are debited from each, and the
/// wait is the longest any of them asks for.
public struct BandwidthCaps: BandwidthAccount {
    public let buckets: [TokenBucket]

    /// nil when there is no cap at all, so steps pay nothing for the extension.
    public init?(_ buckets: [TokenBucket?]) {
        let present = buckets.compactMap { $0 }
        guard !present.isEmpty else { return nil }
        self.buckets = present
    }

    public func reserve(_ bytes: Int64) -> Int64 {
        buckets.reduce(0) { max($0, $1.reserve(bytes)) }
    }
}
