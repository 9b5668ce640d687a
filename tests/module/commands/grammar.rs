//! One grammar for every command (docs/grammar.md): required arguments by
//! position, then options in any order, each at most once; durations with
//! units; errors that name the word or option at fault.

use crate::support::*;

const PERIOD: &str =
    "ERR invalid period: expected seconds or a number with a unit: ms, s, m, h or d";
const WINDOW: &str =
    "ERR invalid window: expected seconds or a number with a unit: ms, s, m, h or d";
const LEASE: &str = "ERR invalid lease: expected seconds or a number with a unit: ms, s, m, h or d";

/// Every public command, with the fewest words it needs and an option it
/// takes.
const COMMANDS: &[(&str, &str)] = &[
    ("CL.THROTTLE k 1 1 1", "MS"),
    ("CL.PEEK k 1 1 1", "MS"),
    ("CL.RESERVE k 1 1 1 MAXWAIT 1", "MS"),
    ("CL.REFUND k 1 1 1 1", "MS"),
    ("CL.THROTTLEALL 1 k GCRA 1 1 1", "MS"),
    ("SW.ALLOW k 1 1", "APPROX"),
    ("SW.PEEK k 1 1", "APPROX"),
    ("SW.REFUND k 1 1 1", "APPROX"),
    ("FW.INCR k 1 1", "ALIGN"),
    ("FW.PEEK k 1 1", "ALIGN"),
    ("FW.REFUND k 1 1 1", "ALIGN"),
    ("CC.ACQUIRE k 1 1", "MS"),
    ("CC.PEEK k 1", "MS"),
    ("CL.LIMIT k policy", "SHADOW"),
    ("CL.TOP", "RESET"),
    ("CL.POLICY SET p GCRA 1 1 1", "SHADOW"),
];

#[test]
fn unknown_and_repeated_options_are_named_the_same_way_everywhere() {
    let s = Server::start();
    let c = &mut s.conn();
    for (base, flag) in COMMANDS {
        for (extra, want) in [
            (
                "APROX".to_string(),
                "ERR unknown option 'APROX'".to_string(),
            ),
            (format!("{flag} {flag}"), format!("ERR {flag} given twice")),
            (
                format!("{} x", flag.to_lowercase()),
                "ERR unknown option 'x'".to_string(),
            ),
        ] {
            let line = format!("{base} {extra}");
            assert_eq!(err(c, &line), want, "{line}");
        }
    }
    for line in ["CC.RELEASE k a FOO", "CC.RENEW k a 10 FOO"] {
        assert_eq!(err(c, line), "ERR unknown option 'FOO'", "{line}");
    }
    // Words are shown as printable ASCII, at most 32 bytes.
    let hostile: Vec<&[u8]> = vec![b"CL.THROTTLE", b"k", b"1", b"1", b"1", b"a\r\nb\xff"];
    assert_eq!(run(c, &hostile).unwrap_err(), "ERR unknown option 'a??b?'");
    let long = format!("CL.PEEK k 1 1 1 {}", "Z".repeat(100));
    assert_eq!(
        err(c, &long),
        format!("ERR unknown option '{}'", "Z".repeat(32))
    );
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    assert!(keys.is_empty(), "errors wrote {keys:?}");
}

#[test]
fn keywords_need_their_value() {
    let s = Server::start();
    let c = &mut s.conn();
    for (line, want) in [
        ("FW.INCR k 1 day TZ", "ERR TZ needs a value"),
        ("FW.PEEK k 1 day MS TZ", "ERR TZ needs a value"),
        ("FW.REFUND k 1 day 1 TZ", "ERR TZ needs a value"),
        ("CL.RESERVE k 1 1 1 MAXWAIT", "ERR MAXWAIT needs a value"),
        ("CC.ACQUIRE k 1 1 ID", "ERR ID needs a value"),
        (
            "CL.THROTTLEALL 1 k SW 1 1 QUANTITY",
            "ERR QUANTITY needs a value",
        ),
        ("CL.THROTTLEALL 1 k FW 1 day TZ", "ERR TZ needs a value"),
    ] {
        assert_eq!(err(c, line), want, "{line}");
    }
}

#[test]
fn options_come_in_any_order() {
    let s = Server::start();
    let c = &mut s.conn();
    s.set_time(T0);
    // Each form of a call answers as its first form on a fresh key.
    let forms: &[&[&str]] = &[
        &["CL.THROTTLE {} 5 10 60 2 MS", "CL.THROTTLE {} 5 10 60 MS 2"],
        &[
            "CL.RESERVE {} 1 1 1 2 MAXWAIT 5 MS",
            "CL.RESERVE {} 1 1 1 MS MAXWAIT 5 2",
            "CL.RESERVE {} 1 1 1 MAXWAIT 5 MS 2",
        ],
        &[
            "SW.ALLOW {} 5 60 2 APPROX MS",
            "SW.ALLOW {} 5 60 MS 2 APPROX",
        ],
        &[
            "FW.INCR {} 5 month 2 TZ +09:00 MS",
            "FW.INCR {} 5 month MS TZ +09:00 2",
            "FW.INCR {} 5 month TZ +09:00 MS 2 ALIGN",
        ],
        &["FW.INCR {} 5 60 ALIGN 2 MS", "FW.INCR {} 5 60 MS ALIGN 2"],
        &[
            "CL.THROTTLEALL 2 {}:a {}:b SW 5 60 APPROX FW 5 day TZ +01:00 ALIGN QUANTITY 2 MS",
            "CL.THROTTLEALL 2 {}:a {}:b SW 5 60 APPROX FW 5 day MS ALIGN QUANTITY 2 TZ +01:00",
        ],
    ];
    for (n, variants) in forms.iter().enumerate() {
        let first = cmd(c, &variants[0].replace("{}", &format!("first{n}"))).unwrap();
        for (m, variant) in variants.iter().enumerate() {
            let line = variant.replace("{}", &format!("v{n}_{m}"));
            assert_eq!(cmd(c, &line).unwrap(), first, "{line}");
        }
    }
    let leases = ["CC.ACQUIRE l 5 30 ID a MS", "CC.ACQUIRE l2 5 30 MS ID a"];
    let a = cmd(c, leases[0]).unwrap();
    assert_eq!(cmd(c, leases[1]).unwrap(), a);
}

#[test]
fn durations_take_units_and_plain_seconds_stay() {
    let s = Server::start();
    let c = &mut s.conn();
    s.set_time(T0);
    // The same limit written in seconds and with each unit: same replies
    // and the same stored state.
    let same: &[(&str, &[&str])] = &[
        ("CL.THROTTLE {} 0 1 60", &["60s", "1m", "60000ms"]),
        ("CL.THROTTLE {} 0 1 3600", &["1h", "60m", "3600S"]),
        ("CL.THROTTLE {} 0 1 0.5", &["500ms", "0.5s", ".5"]),
        ("SW.ALLOW {} 5 86400", &["1d", "24h", "1440m"]),
        ("SW.ALLOW {} 5 90 APPROX", &["1.5m", "90000ms"]),
        ("FW.INCR {} 5 900", &["15m", "0.25h"]),
        ("CC.ACQUIRE {} 5 30 ID x", &["30s", "0.5m", "30000ms"]),
    ];
    for (n, (seconds, units)) in same.iter().enumerate() {
        let key = format!("s{n}");
        let want = cmd(c, &seconds.replace("{}", &key)).unwrap();
        let strings = seconds.starts_with("CL.") || seconds.starts_with("FW.");
        let state =
            |c: &mut redis::Connection, key: &str| strings.then(|| (get(c, key), pttl(c, key)));
        let want_state = state(c, &key);
        for (m, unit) in units.iter().enumerate() {
            let words: Vec<&str> = seconds.split(' ').collect();
            let at = if seconds.starts_with("CL.") { 4 } else { 3 };
            let mut line: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            line[at] = unit.to_string();
            let key2 = format!("u{n}_{m}");
            let line = line.join(" ").replace("{}", &key2);
            assert_eq!(cmd(c, &line).unwrap(), want, "{line}");
            assert_eq!(state(c, &key2), want_state, "{line}");
        }
    }
    // MAXWAIT and CC.RENEW take durations too.
    assert_eq!(five(c, "CL.RESERVE r 0 1 1m MAXWAIT 2m"), [0, 1, 0, -1, 60]);
    assert_eq!(
        five(c, "CL.RESERVE r 0 1 1m MAXWAIT 2m"),
        [0, 1, 0, 60, 120]
    );
    assert_eq!(
        five(c, "CL.RESERVE r 0 1 1m MAXWAIT 90000ms"),
        [1, 1, 0, 120, 120]
    );
    cmd(c, "CC.ACQUIRE l 1 10 ID a").unwrap();
    assert_eq!(cmd(c, "CC.RENEW l a 2m").unwrap(), Value::Int(1));
    assert_eq!(pttl(c, "l"), 120_000);
    for (line, want) in [
        ("CL.THROTTLE k 1 1 1x", PERIOD),
        ("CL.THROTTLE k 1 1 ms", PERIOD),
        ("CL.THROTTLE k 1 1 1.5.0s", PERIOD),
        ("CL.THROTTLE k 1 1 0.0000001ms", PERIOD),
        ("SW.ALLOW k 1 1y", WINDOW),
        ("FW.INCR k 5 days", WINDOW),
        ("CC.ACQUIRE k 1 10sec", LEASE),
        ("CC.RENEW k a 1w", LEASE),
        (
            "CL.RESERVE k 1 1 1 MAXWAIT soon",
            "ERR invalid MAXWAIT: expected seconds or a number with a unit: ms, s, m, h or d",
        ),
        (
            "CL.THROTTLE k 1 1 0ms",
            "ERR invalid period: must be greater than 0 seconds",
        ),
        (
            "SW.ALLOW k 1 -1m",
            "ERR invalid window: must be greater than 0 seconds",
        ),
        (
            "CL.THROTTLE k 1 1 106752d",
            "ERR parameters out of range: their nanosecond arithmetic overflows 64 bits",
        ),
    ] {
        assert_eq!(err(c, line), as_server_says(line, want), "{line}");
    }
}

#[test]
fn ms_changes_the_reply_only() {
    let s = Server::start();
    let c = &mut s.conn();
    s.set_time(T0);
    // A window of 60,000 seconds, answered in milliseconds.
    assert_eq!(five(c, "SW.ALLOW a 5 60000 MS"), [0, 5, 4, -1, 60_000_000]);
    assert_eq!(five(c, "SW.ALLOW b 5 60s MS"), [0, 5, 4, -1, 60_000]);
    assert_eq!(five(c, "SW.ALLOW c 5 60000ms MS"), [0, 5, 4, -1, 60_000]);
}

#[test]
fn checks_come_in_the_documented_order() {
    let s = Server::start();
    let c = &mut s.conn();
    keys_of_every_type(c);
    for (line, want) in [
        // Options' syntax before the parameters.
        ("CL.THROTTLE k x 1 1 FOO", "ERR unknown option 'FOO'"),
        (
            "SW.ALLOW list -1 1 -2",
            "ERR invalid quantity: must be 0 or greater",
        ),
        // Parameters before option values.
        (
            "FW.INCR k -1 day TZ nowhere",
            "ERR invalid limit: must be 0 or greater",
        ),
        (
            "FW.INCR k 1 60 TZ +01:00",
            "ERR TZ needs a calendar window: minute, hour, day, week, month or year",
        ),
        (
            "CL.RESERVE k -1 1 1",
            "ERR invalid max_burst: must be 0 or greater",
        ),
        // A refund's quantity after the limiter's parameters.
        (
            "CL.REFUND k 1 0 1 -1",
            "ERR invalid count_per_period: must be 1 or greater",
        ),
        (
            "SW.REFUND k 1 1 x APPROX",
            "ERR value is not an integer or out of range",
        ),
        // The key last.
        ("CL.THROTTLE list 1 1 1 FOO", "ERR unknown option 'FOO'"),
        (
            "CC.ACQUIRE list 1 0",
            "ERR invalid lease: must be greater than 0 seconds",
        ),
    ] {
        assert_eq!(err(c, line), want, "{line}");
    }
}
