//! Stored state from arbitrary bytes (RDB, RESTORE, SW.LOAD, CC.LOAD) for
//! every module type: decoding is total, and what decodes re-encodes to an
//! equal state.
#![no_main]
use cell_core::lease::Leases;
use cell_core::window_state::WindowState;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(state) = WindowState::decode(data) {
        assert_eq!(WindowState::decode(&state.encode()), Some(state));
    }
    if let Some(leases) = Leases::decode(data) {
        assert_eq!(Leases::decode(&leases.encode()), Some(leases));
    }
});
