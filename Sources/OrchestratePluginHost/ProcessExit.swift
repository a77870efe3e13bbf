#if canImport(Glibc)
import Glibc
#endif

/// How a process that has loaded plugins ends: `orchestrate` and `orchestrate-plugin-runner`.
///
/// ```swift
/// ProcessExit.now(0)   // instead of exit(0)
/// ```
public enum ProcessExit {
    /// Flushes the C output streams and ends the process with `status` at once, without running
    /// exit handlers or library destructors.
    ///
    /// Why not `exit`: plugins are never unloaded and may still have threads at work when the
    /// process ends (a download's trailing hash, a library's resolver, a third party's pool).
    /// `exit` runs every loaded library's exit handler while those threads go on: OpenSSL's
    /// `OPENSSL_cleanup` frees what a thread hashing with it uses, C++ static destructors tear
    /// down what others read, and the process dies of SIGSEGV or SIGABRT after its work is done
    /// (seen in CI after a run had succeeded). Nothing of orchestrate needs those handlers: every
    /// journal write is committed before it is acted on (a `kill -9` here loses nothing), the
    /// terminal is written with write(2), and the C streams (`print`) are flushed here.
    public static func now(_ status: Int32) -> Never {
        fflush(nil)
        _exit(status)
    }

    /// Like `now`, for the emergency exit (a second Ctrl-C), without flushing the C streams:
    /// `fflush` waits for a stream's lock, and a thread blocked writing to a stdout nobody reads
    /// (a full pipe, a terminal stopped with Ctrl-S) holds it forever; the exit the user asked for
    /// must not wait on that. What a run prints goes out with write(2) (`Terminal`,
    /// `BatchedWriter`), so nothing of it waits in a C stream.
    public static func immediately(_ status: Int32) -> Never {
        _exit(status)
    }
}
