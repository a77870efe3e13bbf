#if canImport(Glibc)
import Glibc
#endif
import CCurl

/// libcurl's variadic entry points (`curl_easy_setopt`, `curl_easy_getinfo`), which Swift cannot
/// import, looked up once with dlsym and called through fixed prototypes.
///
/// Why: the CCurl system-library module only includes `curl/curl.h`; the clean fix is a few
/// `static inline` non-variadic wrappers in its shim header (see the report). Calling a
/// variadic C function through a non-variadic prototype with one integer or pointer argument is
/// sound on the Linux ABIs this project targets (x86-64 SysV, AArch64 AAPCS64).
enum Curl {
    typealias Handle = UnsafeMutableRawPointer
    private typealias SetoptInt = @convention(c) (Handle?, CURLoption, Int) -> CURLcode
    private typealias SetoptPointer = @convention(c) (Handle?, CURLoption, UnsafeRawPointer?) -> CURLcode
    private typealias Getinfo = @convention(c) (Handle?, CURLINFO, UnsafeMutableRawPointer?) -> CURLcode

    private struct Symbols: @unchecked Sendable {
        let setopt: UnsafeMutableRawPointer
        let getinfo: UnsafeMutableRawPointer
    }

    /// Resolved once; curl_global_init is also done once here (it is not thread-safe).
    private static let symbols: Symbols = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        // The plugin is opened RTLD_LOCAL, so libcurl's symbols are not global: ask the library
        // (already loaded as this plugin's dependency; SONAME libcurl.so.4) directly.
        let handle = dlopen("libcurl.so.4", RTLD_NOW | RTLD_NOLOAD) ?? dlopen("libcurl.so.4", RTLD_NOW)
        guard let setopt = dlsym(handle, "curl_easy_setopt"), let getinfo = dlsym(handle, "curl_easy_getinfo") else {
            fatalError("libcurl is loaded but curl_easy_setopt/curl_easy_getinfo were not found")
        }
        return Symbols(setopt: setopt, getinfo: getinfo)
    }()

    static func set(_ handle: Handle, _ option: CURLoption, _ value: Int) {
        _ = unsafeBitCast(symbols.setopt, to: SetoptInt.self)(handle, option, value)
    }

    static func set(_ handle: Handle, _ option: CURLoption, _ value: Bool) {
        set(handle, option, value ? 1 : 0)
    }

    static func set(_ handle: Handle, _ option: CURLoption, pointer: UnsafeRawPointer?) {
        _ = unsafeBitCast(symbols.setopt, to: SetoptPointer.self)(handle, option, pointer)
    }

    /// Strings are copied by libcurl (CURLOPT_URL and friends), so a temporary is fine.
    static func set(_ handle: Handle, _ option: CURLoption, _ value: String) {
        value.withCString { set(handle, option, pointer: UnsafeRawPointer($0)) }
    }

    static func infoInt(_ handle: Handle, _ info: CURLINFO) -> Int {
        var value = 0
        _ = unsafeBitCast(symbols.getinfo, to: Getinfo.self)(handle, info, &value)
        return value
    }

    static func infoString(_ handle: Handle, _ info: CURLINFO) -> String? {
        var value: UnsafePointer<CChar>?
        _ = unsafeBitCast(symbols.getinfo, to: Getinfo.self)(handle, info, &value)
        return value.map { String(cString: $0) }
    }

    static func ensureInitialised() { _ = symbols }

    static func describe(_ code: CURLcode) -> String {
        String(cString: curl_easy_strerror(code))
    }
}
