//! Every error case, word for word, each followed by a PING: no input may
//! bring the server down or write anything.

use crate::support::*;

const ARITY: &str = "ERR wrong number of arguments for 'cl.throttle' command";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn argument_errors_have_exact_texts_and_write_nothing() {
    let s = Server::start();
    let c = &mut s.conn();
    let cases: &[(&str, &str)] = &[
        ("CL.THROTTLE", ARITY),
        ("CL.THROTTLE k", ARITY),
        ("CL.THROTTLE k 1 2", ARITY),
        ("CL.THROTTLE k 1 2 3 4 MS 5", "ERR quantity given twice"),
        ("CL.THROTTLE k 1 2 3 4 5", "ERR quantity given twice"),
        ("CL.THROTTLE k 1 2 3 MS MS", "ERR MS given twice"),
        ("CL.THROTTLE k 1 2 3 FOO", "ERR unknown option 'FOO'"),
        ("CL.THROTTLE k x 1 1", NOT_INT),
        ("CL.THROTTLE k 1 x 1", NOT_INT),
        (
            "CL.THROTTLE k 1 1 x",
            "ERR invalid period: expected seconds or a number with a unit: ms, s, m, h or d",
        ),
        ("CL.THROTTLE k 1 1 1 x", "ERR unknown option 'x'"),
        ("CL.THROTTLE k 1.5 1 1", NOT_INT),
        ("CL.THROTTLE k 1 1 1 1.5", NOT_INT),
        (
            "CL.THROTTLE k 1 1 1.0000000001",
            "ERR invalid period: expected seconds or a number with a unit: ms, s, m, h or d",
        ),
        ("CL.THROTTLE k 99999999999999999999 1 1", NOT_INT),
        (
            "CL.THROTTLE k 1 1 99999999999999999999",
            "ERR parameters out of range: their nanosecond arithmetic overflows 64 bits",
        ),
        (
            "CL.THROTTLE k -1 1 1",
            "ERR invalid max_burst: must be 0 or greater",
        ),
        (
            "CL.THROTTLE k 1 0 1",
            "ERR invalid count_per_period: must be 1 or greater",
        ),
        (
            "CL.THROTTLE k 1 -5 1",
            "ERR invalid count_per_period: must be 1 or greater",
        ),
        (
            "CL.THROTTLE k 1 1 0",
            "ERR invalid period: must be greater than 0 seconds",
        ),
        (
            "CL.THROTTLE k 1 1 -3",
            "ERR invalid period: must be greater than 0 seconds",
        ),
        (
            "CL.THROTTLE k 1 1 1 -1",
            "ERR invalid quantity: must be 0 or greater",
        ),
        (
            "CL.THROTTLE k 1 2000000000 1",
            "ERR invalid count_per_period: more than one request per nanosecond over period",
        ),
        (
            "CL.THROTTLE k 9223372036854775807 1 1",
            "ERR parameters out of range: their nanosecond arithmetic overflows 64 bits",
        ),
        (
            "CL.THROTTLE k 10000000000 1 1000",
            "ERR parameters out of range: their nanosecond arithmetic overflows 64 bits",
        ),
        (
            "CL.THROTTLE k 1 1 1 9223372036854775807",
            "ERR parameters out of range: their nanosecond arithmetic overflows 64 bits",
        ),
        (
            "CL.PEEK k 1 1",
            "ERR wrong number of arguments for 'cl.peek' command",
        ),
        ("CL.PEEK k 1 1 1 MS 1", "ERR unknown option '1'"),
        ("CL.PEEK k 1 1 1 1", "ERR unknown option '1'"),
        (
            "CL.PEEK k -1 1 1",
            "ERR invalid max_burst: must be 0 or greater",
        ),
    ];
    for (line, want) in cases {
        assert_eq!(err(c, line), as_server_says(line, want), "{line}");
        ping(c);
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    assert!(keys.is_empty(), "errors wrote {keys:?}");
}

#[test]
fn hostile_bytes_are_errors_not_crashes() {
    let s = Server::start();
    let c = &mut s.conn();
    let hostile: &[&[&[u8]]] = &[
        &[b"CL.THROTTLE", b"k", b"", b"1", b"1"],
        &[b"CL.THROTTLE", b"k", b"1", b"", b"1"],
        &[b"CL.THROTTLE", b"k", b"1", b"1", b""],
        &[b"CL.THROTTLE", b"k", b"1", b"1", b"1", b""],
        &[b"CL.THROTTLE", b"k", b"\xff\xfe", b"1", b"1"],
        &[b"CL.THROTTLE", b"k", b"1", b"1", b"\xc3\x28"],
        &[b"CL.THROTTLE", b"k", b"1\x00", b"1", b"1"],
        &[b"CL.THROTTLE", b"k", b"-9223372036854775808", b"1", b"1"],
        &[b"CL.THROTTLE", b"k", b"1", b"-9223372036854775808", b"1"],
        &[
            b"CL.THROTTLE",
            b"k",
            b"1",
            b"1",
            b"1",
            b"-9223372036854775808",
        ],
        &[b"CL.THROTTLE", b"k", b"1", b"1", b"9223372036.854775808"],
        &[b"CL.THROTTLE", b"k", b"1", b"1", b"1e9"],
        &[b"CL.THROTTLE", b"k", b"1", b"1", b"nan"],
    ];
    for words in hostile {
        let e = run(c, words).expect_err("hostile input must be refused");
        assert!(e.starts_with("ERR "), "{e}");
        ping(c);
    }
    // Binary and empty key names are fine keys.
    for key in [&b""[..], b"\xff\x00\xfe", b"\r\n"] {
        let r = run(c, &[b"CL.THROTTLE", key, b"1", b"1", b"1"]).unwrap();
        assert_eq!(r, Value::Array([0, 2, 1, -1, 1].map(Value::Int).to_vec()));
        ping(c);
    }
}

#[test]
fn keys_of_other_types_and_junk_strings() {
    let s = Server::start();
    let c = &mut s.conn();
    keys_of_every_type(c);
    for key in ["list", "hash", "set", "zset", "stream"] {
        assert_eq!(err(c, &format!("CL.THROTTLE {key} 1 1 1")), WRONGTYPE);
        ping(c);
        assert_eq!(err(c, &format!("CL.PEEK {key} 1 1 1")), WRONGTYPE);
        ping(c);
    }
    let invalid =
        "ERR key holds a string that is not a valid CL.THROTTLE state (an integer TAT in nanoseconds)";
    let not_utf8 = &b"\xff\xfe"[..];
    let texts = ["junk", "", "12.5", "99999999999999999999", " 1"];
    for junk in texts.map(str::as_bytes).into_iter().chain([not_utf8]) {
        redis::cmd("SET")
            .arg("junk")
            .arg(junk)
            .query::<()>(c)
            .unwrap();
        assert_eq!(err(c, "CL.THROTTLE junk 1 1 1"), invalid);
        assert_eq!(err(c, "CL.PEEK junk 1 1 1"), invalid);
        ping(c);
        let after: Vec<u8> = redis::cmd("GET").arg("junk").query(c).unwrap();
        assert_eq!(after, junk, "an error must not touch the key");
    }
}

#[test]
fn sliding_and_fixed_window_errors() {
    let s = Server::start();
    let c = &mut s.conn();
    let cases: &[(&str, &str)] = &[
        ("SW.ALLOW k 1", "ERR wrong number of arguments for 'sw.allow' command"),
        ("SW.ALLOW k 1 1 1 APPROX MS x", "ERR unknown option 'x'"),
        ("SW.ALLOW k 1 1 1 APPROX x", "ERR unknown option 'x'"),
        ("FW.INCR k 1", "ERR wrong number of arguments for 'fw.incr' command"),
        ("FW.INCR k 1 day TZ +01:00 1 ALIGN MS x", "ERR unknown option 'x'"),
        ("FW.INCR k 1 1 1 ALIGN MS x", "ERR unknown option 'x'"),
        ("FW.INCR k 1 1 1 ALIGN x", "ERR unknown option 'x'"),
        ("SW.ALLOW k x 1", NOT_INT),
        ("SW.ALLOW k 1 x", "ERR invalid window: expected seconds or a number with a unit: ms, s, m, h or d"),
        ("SW.ALLOW k 1 1 x", "ERR unknown option 'x'"),
        ("SW.ALLOW k 1 1 1x", NOT_INT),
        ("FW.INCR k 1 1 1.5", NOT_INT),
        ("FW.INCR k 1 1e3 1", "ERR invalid window: expected seconds or a number with a unit: ms, s, m, h or d"),
        ("SW.ALLOW k -1 1", "ERR invalid limit: must be 0 or greater"),
        ("FW.INCR k -1 1", "ERR invalid limit: must be 0 or greater"),
        ("SW.ALLOW k 1 0", "ERR invalid window: must be greater than 0 seconds"),
        ("FW.INCR k 1 -0.5", "ERR invalid window: must be greater than 0 seconds"),
        ("SW.ALLOW k 1 1 -1", "ERR invalid quantity: must be 0 or greater"),
        ("FW.INCR k 1 1 -1 ALIGN", "ERR invalid quantity: must be 0 or greater"),
        ("SW.ALLOW k 1 1 1 1", "ERR quantity given twice"),
        ("SW.ALLOW k 1 1 APPROX approx", "ERR APPROX given twice"),
        ("FW.INCR k 1 1 ALIGN ALIGN", "ERR ALIGN given twice"),
        ("SW.RECORD k 0 1 1", "ERR invalid SW.RECORD: needs window >= 1, at >= 0 and not before the newest entry, quantity >= 1"),
        ("SW.RECORD k 1 -1 1", "ERR invalid SW.RECORD: needs window >= 1, at >= 0 and not before the newest entry, quantity >= 1"),
        ("SW.RECORD k 1 1 0", "ERR invalid SW.RECORD: needs window >= 1, at >= 0 and not before the newest entry, quantity >= 1"),
        ("SW.RECORD k 1 1 1 EXACT", "ERR syntax error"),
        ("SW.LOAD k junk", "ERR invalid SW.LOAD payload: not a serialized sliding window"),
        ("SW.LOAD k", "ERR wrong number of arguments for 'sw.load' command"),
    ];
    for (line, want) in cases {
        assert_eq!(err(c, line), as_server_says(line, want), "{line}");
        ping(c);
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    assert!(keys.is_empty(), "errors wrote {keys:?}");

    cmd(c, "SW.RECORD rec 10000000000 1699999995000000000 1").unwrap();
    cmd(c, "SW.RECORD rec 10000000000 1700000000000000000 1").unwrap();
    let before = cmd(c, "DUMP rec").unwrap();
    assert_eq!(
        err(c, "SW.RECORD rec 1 1699999999000000000 1"),
        "ERR invalid SW.RECORD: needs window >= 1, at >= 0 and not before the newest entry, quantity >= 1"
    );
    assert_eq!(
        cmd(c, "DUMP rec").unwrap(),
        before,
        "a refused record changes nothing"
    );
    five(c, "SW.ALLOW ex 5 10");
    five(c, "SW.ALLOW ap 5 10 APPROX");
    assert_eq!(
        err(c, "SW.ALLOW ex 5 10 APPROX"),
        "ERR key holds an exact sliding window; APPROX needs a key of its own"
    );
    assert_eq!(
        err(c, "SW.ALLOW ap 5 10"),
        "ERR key holds an APPROX sliding window; the exact log needs a key of its own"
    );
    ping(c);
}

#[test]
fn sliding_and_fixed_window_wrong_types() {
    let s = Server::start();
    let c = &mut s.conn();
    keys_of_every_type(c);
    cmd(c, "SET str 12").unwrap();
    five(c, "SW.ALLOW sw 5 10");
    for key in ["list", "hash", "set", "zset", "stream", "str"] {
        assert_eq!(err(c, &format!("SW.ALLOW {key} 1 1")), WRONGTYPE);
        assert_eq!(err(c, &format!("SW.RECORD {key} 1 1 1")), WRONGTYPE);
        ping(c);
    }
    for key in ["list", "hash", "set", "zset", "stream", "sw"] {
        assert_eq!(err(c, &format!("FW.INCR {key} 1 1")), WRONGTYPE);
        ping(c);
    }
    for junk in [&b"junk"[..], b"", b"1.5", b"99999999999999999999", b"\xff"] {
        redis::cmd("SET")
            .arg("junk")
            .arg(junk)
            .query::<()>(c)
            .unwrap();
        assert_eq!(
            err(c, "FW.INCR junk 5 10"),
            "ERR key holds a string that is not a valid FW.INCR counter (an integer)"
        );
        ping(c);
    }
}
