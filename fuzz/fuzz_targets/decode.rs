//! Stored sliding-window state from arbitrary bytes (RDB, RESTORE, SW.LOAD):
//! decoding is total, and what decodes re-encodes to an equal state.
#![no_main]
use cell_core::window_state::WindowState;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(state) = WindowState::decode(data) {
        assert_eq!(WindowState::decode(&state.encode()), Some(state));
    }
});
