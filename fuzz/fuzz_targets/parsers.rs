//! Argument parsers on arbitrary bytes: they return errors, never panic.
#![no_main]
use cell_core::{calendar, parse, zoned};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse::integer(data);
    let _ = calendar::parse_offset(data);
    let _ = zoned::find(data);
    if let Ok(ns) = parse::seconds_as_nanos(data) {
        // What parses is exact: formatting it back parses to the same value.
        let text = format!("{}.{:09}", ns / 1_000_000_000, (ns % 1_000_000_000).abs());
        if ns >= 0 {
            assert_eq!(parse::seconds_as_nanos(text.as_bytes()), Ok(ns));
        }
    }
});
