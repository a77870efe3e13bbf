import CCurl

/// libcurl's option and info calls through the typed, non-variadic wrappers of the CCurl shim
/// (Sources/CCurl/shim.h): Swift cannot call the variadic curl_easy_setopt/getinfo directly.
enum Curl {
    typealias Handle = UnsafeMutableRawPointer

    /// curl_global_init is not thread-safe: done once, before the first handle.
    private static let initialised: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        return true
    }()

    static func ensureInitialised() { _ = initialised }

    static func set(_ handle: Handle, _ option: CURLoption, _ value: Int) {
        // Options ending in _LARGE take a curl_off_t, the others a long (both 64-bit here, but
        // the wrapper keeps the C types exact).
        if Int(option.rawValue) >= Int(CURLOPTTYPE_OFF_T) && Int(option.rawValue) < Int(CURLOPTTYPE_BLOB) {
            _ = orc_curl_setopt_off(handle, option, curl_off_t(value))
        } else {
            _ = orc_curl_setopt_long(handle, option, value)
        }
    }

    static func set(_ handle: Handle, _ option: CURLoption, _ value: Bool) {
        set(handle, option, value ? 1 : 0)
    }

    static func set(_ handle: Handle, _ option: CURLoption, pointer: UnsafeRawPointer?) {
        _ = orc_curl_setopt_pointer(handle, option, pointer)
    }

    /// Strings are copied by libcurl (CURLOPT_URL and friends), so a temporary is fine.
    static func set(_ handle: Handle, _ option: CURLoption, _ value: String) {
        value.withCString { _ = orc_curl_setopt_pointer(handle, option, $0) }
    }

    /// A string option whose refusal must not go unnoticed (a security setting): true when set.
    static func setChecked(_ handle: Handle, _ option: CURLoption, _ value: String) -> Bool {
        value.withCString { orc_curl_setopt_pointer(handle, option, $0) } == CURLE_OK
    }

    static func set(_ handle: Handle, _ option: CURLoption, write callback: curl_write_callback) {
        _ = orc_curl_setopt_write_callback(handle, option, callback)
    }

    static func set(_ handle: Handle, _ option: CURLoption, read callback: curl_read_callback) {
        _ = orc_curl_setopt_read_callback(handle, option, callback)
    }

    static func set(_ handle: Handle, _ option: CURLoption, seek callback: curl_seek_callback) {
        _ = orc_curl_setopt_seek_callback(handle, option, callback)
    }

    static func set(_ handle: Handle, _ option: CURLoption, xferinfo callback: curl_xferinfo_callback) {
        _ = orc_curl_setopt_xferinfo_callback(handle, option, callback)
    }

    static func infoInt(_ handle: Handle, _ info: CURLINFO) -> Int {
        var value = 0
        _ = orc_curl_getinfo_long(handle, info, &value)
        return value
    }

    static func infoString(_ handle: Handle, _ info: CURLINFO) -> String? {
        var value: UnsafePointer<CChar>?
        _ = orc_curl_getinfo_string(handle, info, &value)
        return value.map { String(cString: $0) }
    }

    static func describe(_ code: CURLcode) -> String {
        String(cString: curl_easy_strerror(code))
    }
}
