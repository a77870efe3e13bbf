import CCurl

/// libcurl's option and info calls through the typed, non-variadic wrappers of the CCurl shim
/// (Sources/CCurl/shim.h): Swift cannot call the variadic curl_easy_setopt/getinfo directly.
public enum Curl {
    public typealias Handle = UnsafeMutableRawPointer

    /// curl_global_init is not thread-safe: done once, before the first handle.
    private static let initialised: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        return true
    }()

    public static func ensureInitialised() { _ = initialised }

    /// libcurl's version as 0xXXYYZZ (8.10.0 is 0x080a00).
    public static var versionNumber: Int { Int(curl_version_info(CURLVERSION_FIRST).pointee.version_num) }

    public static func set(_ handle: Handle, _ option: CURLoption, _ value: Int) {
        // Options numbered in the curl_off_t range take a curl_off_t, the others a long (both
        // 64-bit here, but the wrapper keeps the C types exact).
        if Int(option.rawValue) >= Int(CURLOPTTYPE_OFF_T) && Int(option.rawValue) < Int(CURLOPTTYPE_BLOB) {
            _ = orc_curl_setopt_off(handle, option, curl_off_t(value))
        } else {
            _ = orc_curl_setopt_long(handle, option, value)
        }
    }

    public static func set(_ handle: Handle, _ option: CURLoption, _ value: Bool) { set(handle, option, value ? 1 : 0) }

    public static func set(_ handle: Handle, _ option: CURLoption, pointer: UnsafeRawPointer?) {
        _ = orc_curl_setopt_pointer(handle, option, pointer)
    }

    /// Strings are copied by libcurl (CURLOPT_URL and friends), so a temporary is fine.
    public static func set(_ handle: Handle, _ option: CURLoption, _ value: String) {
        value.withCString { _ = orc_curl_setopt_pointer(handle, option, $0) }
    }

    /// A string option whose refusal must not go unnoticed (a security setting): true when set.
    public static func setChecked(_ handle: Handle, _ option: CURLoption, _ value: String) -> Bool {
        value.withCString { orc_curl_setopt_pointer(handle, option, $0) } == CURLE_OK
    }

    public static func infoInt(_ handle: Handle, _ info: CURLINFO) -> Int {
        var value = 0
        _ = orc_curl_getinfo_long(handle, info, &value)
        return value
    }

    /// A curl_off_t info (sizes, times); -1 when libcurl does not know it.
    public static func infoOff(_ handle: Handle, _ info: CURLINFO) -> Int64 {
        var value: curl_off_t = -1
        _ = orc_curl_getinfo_off(handle, info, &value)
        return Int64(value)
    }

    public static func infoString(_ handle: Handle, _ info: CURLINFO) -> String? {
        var value: UnsafePointer<CChar>?
        _ = orc_curl_getinfo_string(handle, info, &value)
        return value.map { String(cString: $0) }
    }

    public static func describe(_ code: CURLcode) -> String { String(cString: curl_easy_strerror(code)) }
}
