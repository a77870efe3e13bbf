//! The orchestrate plugin ABI 1.1, transcribed by hand from
//! `Sources/COrchestratePlugin/include/orchestrate/plugin.h` (the header is the contract; read
//! it for what each function promises). Every struct is `#[repr(C)]` with the header's fields in
//! the header's order; callbacks are `Option<unsafe extern "C" fn>` because C may hand NULL.
//! The size checks at the end fail the build if a field is dropped or mistyped.
#![allow(dead_code)] // the full table is transcribed, though the example calls only part of it

use std::os::raw::{c_char, c_void};

pub const ORC_ABI_VERSION_MAJOR: u32 = 1;
pub const ORC_ABI_VERSION_MINOR: u32 = 1;

// Error kinds, for OrcHostApi::set_error.
pub const ORC_ERROR_RETRYABLE: i32 = 1;
pub const ORC_ERROR_PERMANENT: i32 = 2;
pub const ORC_ERROR_INVALID_INPUT: i32 = 3;
pub const ORC_ERROR_TIMEOUT: i32 = 4;
pub const ORC_ERROR_CANCELLED: i32 = 5;

// Log levels, for OrcHostApi::log.
pub const ORC_LOG_DEBUG: i32 = 0;
pub const ORC_LOG_INFO: i32 = 1;
pub const ORC_LOG_WARN: i32 = 2;
pub const ORC_LOG_ERROR: i32 = 3;

// Return values of OrcStepType::run.
pub const ORC_RUN_OK: i32 = 0;
pub const ORC_RUN_FAILED: i32 = 1;

// Results of OrcHostApi::next_item.
pub const ORC_ITEM_READY: i32 = 1;
pub const ORC_ITEM_TIMEOUT: i32 = 0;
pub const ORC_ITEM_CLOSED: i32 = -1;

// Flags of OrcStepType::flags.
pub const ORC_STEP_ACCEPTS_ITEMS: u32 = 1 << 0;
pub const ORC_STEP_OPENS_SESSION: u32 = 1 << 1;

/// `orc_host`: one running step call, opaque; dead once `run` returns.
#[repr(C)]
pub struct OrcHost {
    _opaque: [u8; 0],
}

/// `orc_item`.
#[repr(C)]
pub struct OrcItem {
    pub struct_size: u32,
    pub id: *const c_char,
    pub json: *const c_char,
    pub checkpoint: *const u8,
    pub checkpoint_size: usize,
}

/// `orc_host_api`: append-only. Read a callback only when `struct_size` covers it (see
/// `api_has!` in host.rs, the Rust twin of the header's `ORC_API_HAS`).
#[repr(C)]
pub struct OrcHostApi {
    pub struct_size: u32,
    pub abi_major: u32,
    pub abi_minor: u32,
    pub log: Option<unsafe extern "C" fn(host: *mut OrcHost, level: i32, message: *const c_char)>,
    pub progress: Option<
        unsafe extern "C" fn(host: *mut OrcHost, bytes_done: i64, bytes_total: i64, files_done: i64, files_total: i64),
    >,
    pub is_cancelled: Option<unsafe extern "C" fn(host: *mut OrcHost) -> i32>,
    pub cancel_fd: Option<unsafe extern "C" fn(host: *mut OrcHost) -> i32>,
    pub sleep_ms: Option<unsafe extern "C" fn(host: *mut OrcHost, milliseconds: i64) -> i32>,
    pub set_output:
        Option<unsafe extern "C" fn(host: *mut OrcHost, name: *const c_char, json_value: *const c_char) -> i32>,
    pub save_checkpoint: Option<unsafe extern "C" fn(host: *mut OrcHost, data: *const u8, size: usize) -> i32>,
    pub load_checkpoint: Option<unsafe extern "C" fn(host: *mut OrcHost, size: *mut usize) -> *const u8>,
    pub set_error: Option<
        unsafe extern "C" fn(
            host: *mut OrcHost,
            kind: i32,
            code: *const c_char,
            message: *const c_char,
            retry_after_ms: i64,
        ),
    >,
    pub next_item: Option<unsafe extern "C" fn(host: *mut OrcHost, timeout_ms: i64, item: *mut OrcItem) -> i32>,
    pub item_done: Option<unsafe extern "C" fn(host: *mut OrcHost, id: *const c_char, ok: i32, error: *const c_char)>,
    pub save_item_checkpoint:
        Option<unsafe extern "C" fn(host: *mut OrcHost, id: *const c_char, data: *const u8, size: usize) -> i32>,
    pub item_progress:
        Option<unsafe extern "C" fn(host: *mut OrcHost, id: *const c_char, bytes_done: i64, bytes_total: i64)>,
    pub get_extension: Option<unsafe extern "C" fn(host: *mut OrcHost, extension_id: *const c_char) -> *const c_void>,
}

/// `orc_step_call`: everything the host knows about one attempt; borrowed until `run` returns.
#[repr(C)]
pub struct OrcStepCall {
    pub struct_size: u32,
    pub step_type: *const c_char,
    pub run_id: *const c_char,
    pub step_id: *const c_char,
    pub inputs_json: *const c_char,
    pub idempotency_key: *const c_char,
    pub run_dir: *const c_char,
    pub attempt: u32,
    pub reserved0: u32,
    pub timeout_ms: i64,
}

/// `orc_step_run_fn`.
pub type OrcStepRunFn =
    unsafe extern "C" fn(call: *const OrcStepCall, api: *const OrcHostApi, host: *mut OrcHost) -> i32;
/// `orc_session_close_fn` (since 1.1).
pub type OrcSessionCloseFn = unsafe extern "C" fn(step_type: *const c_char, outputs_json: *const c_char);

/// `orc_step_type`.
#[repr(C)]
pub struct OrcStepType {
    pub struct_size: u32,
    pub flags: u32,
    pub id: *const c_char,
    pub version: *const c_char,
    pub summary: *const c_char,
    pub documentation: *const c_char,
    pub input_schema: *const c_char,
    pub output_schema: *const c_char,
    pub run: Option<OrcStepRunFn>,
    pub close_session: Option<OrcSessionCloseFn>,
}

/// `orc_plugin`: what the entry point returns; must stay valid for the life of the process.
#[repr(C)]
pub struct OrcPlugin {
    pub struct_size: u32,
    pub abi_major: u32,
    pub abi_minor: u32,
    pub step_type_count: u32,
    pub name: *const c_char,
    pub version: *const c_char,
    pub summary: *const c_char,
    pub step_types: *const *const OrcStepType,
}

/// Makes the plugin's description (raw pointers to `'static` data, never written) storable in a
/// `static`. Sound because nothing it points to is ever mutated.
#[repr(transparent)]
pub struct StaticDescription<T>(pub T);
unsafe impl<T> Sync for StaticDescription<T> {}

// The header's sizes on LP64 targets (Linux and macOS on x86-64 and arm64): a field dropped,
// added or mistyped above changes one of these and stops the build.
#[cfg(target_pointer_width = "64")]
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<OrcItem>() == 40);
    assert!(size_of::<OrcHostApi>() == 128);
    assert!(size_of::<OrcStepCall>() == 72);
    assert!(size_of::<OrcStepType>() == 72);
    assert!(size_of::<OrcPlugin>() == 48);
};
