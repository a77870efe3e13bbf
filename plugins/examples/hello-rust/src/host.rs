//! A safe face on the host callbacks for one `run` call. `Host` borrows the call's `api` and
//! `host` pointers and cannot outlive the `run` call (the `'call` lifetime), which is exactly the
//! header's rule: the `orc_host` pointer is dead once `run` returns.
use crate::abi::{OrcHost, OrcHostApi};
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::os::raw::c_char;

pub struct Host<'call> {
    api: &'call OrcHostApi,
    host: *mut OrcHost,
    _call: PhantomData<&'call OrcHost>,
}

/// `api_has!(host, field)`: true when the host's callback table holds `field` (the Rust form of
/// the header's `ORC_API_HAS(api, field)`). Check it before calling anything added after ABI
/// 1.0, e.g. `if api_has!(host, get_extension) { ... }`.
#[allow(unused_macros)] // this step uses only 1.0 callbacks
macro_rules! api_has {
    ($host:expr, $field:ident) => {{
        let table = std::mem::MaybeUninit::<crate::abi::OrcHostApi>::uninit();
        let base = table.as_ptr();
        // addr_of! computes the field's address without reading the (uninitialised) table.
        let offset = unsafe { std::ptr::addr_of!((*base).$field) as usize - base as usize };
        // Every callback is one function pointer.
        $host.table_covers(offset + std::mem::size_of::<usize>())
    }};
}

/// Reads a 1.0 callback: every field up to `struct_size` is non-NULL, and every host speaks at
/// least 1.0, so a missing one is a broken host.
macro_rules! callback {
    ($api:expr, $field:ident) => {
        $api.$field
            .expect(concat!("orc_host_api.", stringify!($field), " is NULL"))
    };
}

impl<'call> Host<'call> {
    /// # Safety
    /// `api` and `host` are the pointers `run` received, valid for `'call`.
    pub unsafe fn new(api: *const OrcHostApi, host: *mut OrcHost) -> Option<Self> {
        let api = api.as_ref()?;
        Some(Host {
            api,
            host,
            _call: PhantomData,
        })
    }

    /// True when the host's table is at least `end` bytes long: see `api_has!`.
    #[allow(dead_code)] // this step uses only 1.0 callbacks
    pub fn table_covers(&self, end: usize) -> bool {
        end <= self.api.struct_size as usize
    }

    pub fn log(&self, level: i32, message: &str) {
        let text = c_text(message);
        unsafe { callback!(self.api, log)(self.host, level, text.as_ptr()) }
    }

    /// Absolute figures; -1 for any that is unknown.
    pub fn progress(&self, bytes_done: i64, bytes_total: i64, files_done: i64, files_total: i64) {
        unsafe { callback!(self.api, progress)(self.host, bytes_done, bytes_total, files_done, files_total) }
    }

    pub fn is_cancelled(&self) -> bool {
        unsafe { callback!(self.api, is_cancelled)(self.host) != 0 }
    }

    /// Sleeps up to `milliseconds`; returns true when woken by cancellation.
    pub fn sleep_ms(&self, milliseconds: i64) -> bool {
        unsafe { callback!(self.api, sleep_ms)(self.host, milliseconds) != 0 }
    }

    /// Sets output `name` to a JSON text. Err when the host refused it (not valid JSON).
    pub fn set_output(&self, name: &str, json_value: &str) -> Result<(), ()> {
        let (name, value) = (c_text(name), c_text(json_value));
        match unsafe { callback!(self.api, set_output)(self.host, name.as_ptr(), value.as_ptr()) } {
            0 => Ok(()),
            _ => Err(()),
        }
    }

    /// Records why the step failed (`kind` is one of the ORC_ERROR_* constants); the last call wins.
    pub fn set_error(&self, kind: i32, code: &str, message: &str, retry_after_ms: Option<i64>) {
        let (code, message) = (c_text(code), c_text(message));
        unsafe {
            callback!(self.api, set_error)(
                self.host,
                kind,
                code.as_ptr(),
                message.as_ptr(),
                retry_after_ms.unwrap_or(-1),
            )
        }
    }
}

/// A C copy of `text` for the duration of one callback (the host copies what it keeps). An
/// interior NUL, which C cannot carry, ends the text there.
fn c_text(text: &str) -> CString {
    let end = text.find('\0').unwrap_or(text.len());
    CString::new(&text[..end]).expect("no interior NUL")
}

/// The `*const c_char` the host passed, as UTF-8 text (None for NULL or invalid UTF-8).
///
/// # Safety
/// `pointer` is NULL or a NUL-terminated string valid for `'a`.
pub unsafe fn borrowed_str<'a>(pointer: *const c_char) -> Option<&'a str> {
    if pointer.is_null() {
        return None;
    }
    CStr::from_ptr(pointer).to_str().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table as long as a host of `struct_size` bytes would hand over, every callback absent.
    fn table(struct_size: u32) -> OrcHostApi {
        OrcHostApi {
            struct_size,
            abi_major: 1,
            abi_minor: 0,
            log: None,
            progress: None,
            is_cancelled: None,
            cancel_fd: None,
            sleep_ms: None,
            set_output: None,
            save_checkpoint: None,
            load_checkpoint: None,
            set_error: None,
            next_item: None,
            item_done: None,
            save_item_checkpoint: None,
            item_progress: None,
            get_extension: None,
        }
    }

    #[test]
    fn api_has_answers_from_the_hosts_struct_size() {
        let short = table(120); // ends just before get_extension (offset 120 on LP64)
        let host = unsafe { Host::new(&short, std::ptr::null_mut()) }.unwrap();
        assert!(api_has!(host, log) && api_has!(host, item_progress));
        assert!(!api_has!(host, get_extension));
        let full = table(std::mem::size_of::<OrcHostApi>() as u32);
        let host = unsafe { Host::new(&full, std::ptr::null_mut()) }.unwrap();
        assert!(api_has!(host, get_extension));
    }
}
