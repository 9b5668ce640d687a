//! The module's version, Cargo.toml's, as the load log and `COMMAND DOCS`
//! show it and as `MODULE LIST` reports it.

/// The version as text, for the load log and `COMMAND DOCS`: Cargo.toml's.
pub const MODULE_VERSION_TEXT: &str = env!("CARGO_PKG_VERSION");
/// `MODULE LIST`'s `ver`: the same version as one integer,
/// major * 10000 + minor * 100 + patch (0.4.0 is 400), the rule RedisJSON and
/// RedisBloom follow, so that one number in Cargo.toml sets all three.
pub const MODULE_VERSION: i32 = {
    let minor = decimal(env!("CARGO_PKG_VERSION_MINOR"));
    let patch = decimal(env!("CARGO_PKG_VERSION_PATCH"));
    // Two digits each, or the integer would be ambiguous.
    assert!(
        minor < 100 && patch < 100,
        "minor and patch must be below 100"
    );
    decimal(env!("CARGO_PKG_VERSION_MAJOR")) * 10000 + minor * 100 + patch
};

/// A version component as Cargo gives it (decimal digits), at compile time.
const fn decimal(text: &str) -> i32 {
    let bytes = text.as_bytes();
    assert!(
        !bytes.is_empty() && bytes.len() <= 4,
        "a version component of 1 to 4 digits"
    );
    let mut value = 0;
    let mut i = 0;
    while i < bytes.len() {
        assert!(
            bytes[i].is_ascii_digit(),
            "a version component is decimal digits"
        );
        value = value * 10 + (bytes[i] - b'0') as i32;
        i += 1;
    }
    value
}
