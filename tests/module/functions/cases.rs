//! The Functions twin and the module answer every error and every form of
//! the grammar (docs/grammar.md) alike: a list of calls, each on a fresh
//! key, all compared before the test reports every difference at once.

use crate::twin;

use crate::support::*;
use crate::twin::diff::Pair;
use crate::twin::gen::OTHER_TYPES;
use crate::twin::*;

/// Calls as lines; `K` is a fresh key for each.
const CASES: &[&str] = &[
    // Wrong arity.
    "cl.throttle",
    "cl.throttle K",
    "cl.throttle K 1 2",
    "cl.peek K 1 2",
    "cl.reserve K 1 2",
    "cl.refund K 1 2 3",
    "sw.allow K 5",
    "sw.peek K",
    "sw.refund K 5 10",
    "fw.incr K 5",
    "fw.peek K",
    "fw.refund K 5 10",
    "cc.acquire K 2",
    "cc.release K",
    "cc.renew K a",
    "cc.peek K",
    "cl.throttleall",
    // CL.THROTTLE: numbers, durations, options.
    "cl.throttle K 1 2 3",
    "cl.throttle K -1 2 3",
    "cl.throttle K 1 0 3",
    "cl.throttle K 1 -2 3",
    "cl.throttle K 1 2 0",
    "cl.throttle K 1 2 -1",
    "cl.throttle K 1 2 abc",
    "cl.throttle K abc 2 3",
    "cl.throttle K 1 2 3 -1",
    "cl.throttle K 1 2 3 abc",
    "cl.throttle K 1 2 3 0",
    "cl.throttle K 1 2 3 5",
    "cl.throttle K 1 2 3 1 MS MS",
    "cl.throttle K 1 2 3 1 2",
    "cl.throttle K 1 2 3 APROX",
    "cl.throttle K 1 2 3 ms",
    "cl.throttle K 1 2 3 Ms 2",
    "cl.throttle K 1 2 3 MS 2",
    "cl.throttle K 1 2 3 2 MS",
    "cl.throttle K 1 2 3 +2",
    "cl.throttle K 1 2 3 .5",
    "cl.throttle K 1 2 3 1.5",
    "cl.throttle K 1 2 3 007",
    "cl.throttle K 1 2 500ms",
    "cl.throttle K 1 2 15m",
    "cl.throttle K 1 2 1h",
    "cl.throttle K 1 2 1d",
    "cl.throttle K 1 2 1.5s",
    "cl.throttle K 1 2 0.5ms",
    "cl.throttle K 1 2 1MS",
    "cl.throttle K 1 2 0.0000000001s",
    "cl.throttle K 1 2 1.0000000001",
    "cl.throttle K 1 2 1.000000001",
    "cl.throttle K 1 2 0.000000001",
    "cl.throttle K 1 2 9223372036.854775807",
    "cl.throttle K 1 2 9223372036.854775808",
    "cl.throttle K 1 2 99999999999",
    "cl.throttle K 1 2 1e3",
    "cl.throttle K 1 2 1w",
    "cl.throttle K 1 2 ms",
    "cl.throttle K 1 2 -1s",
    "cl.throttle K 1 2 0s",
    "cl.throttle K 1 2 1_000",
    "cl.throttle K 1 2 5.",
    "cl.throttle K 1 2 .5",
    "cl.throttle K 9223372036854775807 1 1",
    "cl.throttle K 1 9223372036854775807 1",
    "cl.throttle K 0 1 0.000000001",
    "cl.throttle K 0 1000000000 1",
    "cl.throttle K 0 1000000001 1",
    "cl.throttle K 9007199254740992 1 1",
    "cl.throttle K 100 1 9223372036",
    "cl.throttle K 1 2 3 9223372036854775807",
    "cl.throttle K 1 2 3 9223372036854775808",
    "cl.throttle K 1 1 60 MS",
    "cl.throttle K 15 30 60 1 MS",
    // CL.PEEK, CL.RESERVE, CL.REFUND.
    "cl.peek K 1 2 3",
    "cl.peek K 1 2 3 1",
    "cl.peek K 1 2 3 MS",
    "cl.peek K 1 2 3 MS MS",
    "cl.peek K 1 2 3 APPROX",
    "cl.reserve K 1 2 3",
    "cl.reserve K 1 2 3 MAXWAIT",
    "cl.reserve K 1 2 3 MAXWAIT -1",
    "cl.reserve K 1 2 3 MAXWAIT 1 MAXWAIT 1",
    "cl.reserve K 1 2 3 MAXWAIT 500ms",
    "cl.reserve K 1 2 3 2 MAXWAIT 1 MS",
    "cl.reserve K 1 2 3 MS MAXWAIT 1 2",
    "cl.reserve K 1 2 3 maxwait 0",
    "cl.reserve K 1 2 3 MAXWAIT abc",
    "cl.reserve K 1 2 3 MAXWAIT 1 -1",
    "cl.reserve K 0 10 1 5 MAXWAIT 1 MS",
    "cl.refund K 1 2 3 1",
    "cl.refund K 1 2 3 -1",
    "cl.refund K 1 2 3 1 1",
    "cl.refund K 1 2 3 1 MS",
    "cl.refund K 1 2 3 abc",
    "cl.refund K 1 2 3 0",
    // CL.THROTTLEALL.
    "cl.throttleall 1 K GCRA 1 2 3",
    "cl.throttleall 1 K GCRA 1 2",
    "cl.throttleall 1 K XYZ 1 2 3",
    "cl.throttleall 1 K GCRA 1 2 3 GCRA 1 2 3",
    "cl.throttleall 1 K GCRA 1 2 3 QUANTITY",
    "cl.throttleall 1 K GCRA 1 2 3 QUANTITY -1",
    "cl.throttleall 1 K GCRA 1 2 3 QUANTITY 2 QUANTITY 2",
    "cl.throttleall 1 K GCRA 1 2 3 MS QUANTITY 2",
    "cl.throttleall 1 K GCRA 1 2 3 quantity 0 ms",
    "cl.throttleall 1 K SW 5 10 APPROX MS QUANTITY 2",
    "cl.throttleall 1 K SW 5 10 MS APPROX",
    "cl.throttleall 1 K FW 5 day TZ +09:00 MS",
    "cl.throttleall 1 K FW 5 10 TZ +01:00",
    "cl.throttleall 1 K FW 5 month TZ",
    "cl.throttleall 1 K FW 5 month TZ +15:00",
    "cl.throttleall 1 K FW 5 10 ALIGN ALIGN",
    "cl.throttleall 1 K FW 5 10 MS ALIGN",
    "cl.throttleall 1 K GCRA 1 2 3 2",
    "cl.throttleall 1 K GCRA 1 2 3 APPROX",
    "cl.throttleall 1 K GCRA -1 2 3",
    "cl.throttleall 1 K SW 5 0",
    "cl.throttleall 1 K FW 5 1h",
    "cl.throttleall 1 K QUANTITY 1 GCRA 1 2 3",
    "cl.throttleall 1 K MS GCRA 1 2 3",
    "cl.throttleall 1 K GCRA 1 2 500ms QUANTITY 9223372036854775807",
    // SW.
    "sw.allow K 5 10",
    "sw.allow K -1 10",
    "sw.allow K 5 0",
    "sw.allow K 5 10 -1",
    "sw.allow K 5 10 APPROX APPROX",
    "sw.allow K 5 10 APROX",
    "sw.allow K 5 10 2 APPROX MS",
    "sw.allow K 5 10 MS APPROX 2",
    "sw.allow K 5 500ms",
    "sw.allow K 5 1h",
    "sw.allow K 5 10 2 2",
    "sw.allow K 5 10 6",
    "sw.allow K 5 10 0",
    "sw.allow K 5 10 approx ms 3",
    "sw.allow K 9223372036854775807 10",
    "sw.allow K 5 9223372036.854775807 APPROX",
    "sw.peek K 5 10",
    "sw.peek K 5 10 2",
    "sw.peek K 5 10 APPROX MS",
    "sw.peek K 5 10 MS MS",
    "sw.refund K 5 10 1",
    "sw.refund K 5 10 -1",
    "sw.refund K 5 10 1 APPROX",
    "sw.refund K 5 10 1 1",
    // FW.
    "fw.incr K 5 10",
    "fw.incr K 5 10 ALIGN ALIGN",
    "fw.incr K 5 day TZ +09:00",
    "fw.incr K 5 day tz -05:00 2 MS",
    "fw.incr K 5 10 TZ +01:00",
    "fw.incr K 5 day TZ",
    "fw.incr K 5 day TZ +15:00",
    "fw.incr K 5 day TZ 0900",
    "fw.incr K 5 day TZ +9:00",
    "fw.incr K 5 day TZ Europe/Paris",
    "fw.incr K 5 day TZ UTC",
    "fw.incr K 5 day TZ +09:00 TZ +09:00",
    "fw.incr K 5 fortnight",
    "fw.incr K 5 DAY",
    "fw.incr K 5 week ALIGN",
    "fw.incr K 5 1d ALIGN",
    "fw.incr K 5 month",
    "fw.incr K 5 year TZ -12:00",
    "fw.incr K 5 minute TZ +14:00 MS",
    "fw.incr K 5 hour TZ +05:45",
    "fw.incr K 5 10 6",
    "fw.incr K 5 10 0",
    "fw.incr K -1 10",
    "fw.incr K 5 0",
    "fw.incr K 5 10 -1",
    "fw.incr K 5 10 ALIGN 2 MS",
    "fw.incr K 5 0.75 ALIGN",
    "fw.incr K 9223372036854775807 10",
    "fw.incr K 5 10 APPROX",
    "fw.peek K 5 10",
    "fw.peek K 5 10 2",
    "fw.peek K 5 day TZ -05:00 MS",
    "fw.peek K 5 10 ALIGN",
    "fw.refund K 5 10 1",
    "fw.refund K 5 10 -1",
    "fw.refund K 5 day 1 TZ +01:00",
    "fw.refund K 5 10 1 1",
    // CC.
    "cc.acquire K 2 10",
    "cc.acquire K 2 0",
    "cc.acquire K -1 10",
    "cc.acquire K 2 10 ID",
    "cc.acquire K 2 10 ID a ID a",
    "cc.acquire K 2 10 id a MS",
    "cc.acquire K 2 10 MS ID a",
    "cc.acquire K 2 10 XYZ",
    "cc.acquire K 2 10 2",
    "cc.acquire K 0 10 ID a",
    "cc.acquire K 2 500ms ID a MS",
    "cc.acquire K 2 -1",
    "cc.acquire K 2 abc ID a",
    "cc.release K a",
    "cc.release K a b",
    "cc.renew K a 10",
    "cc.renew K a 0",
    "cc.renew K a -1",
    "cc.renew K a 10 MS",
    "cc.renew K a 1h",
    "cc.peek K 2",
    "cc.peek K -1",
    "cc.peek K 2 MS MS",
    "cc.peek K 2 XYZ",
    "cc.peek K abc",
    // The order of checks: the options' syntax, then the parameters.
    "sw.allow K abc 10 2 2",
    "sw.allow K abc 10 APROX",
    "cl.throttle K abc 1 1 2 2",
    "cl.throttle K abc 1 1 XX",
    "fw.incr K abc 10 MS MS",
    "cc.acquire K abc 10 ID",
    "fw.incr K 5 10 TZ +01:00 MS MS",
    "fw.incr K 5 day TZ +15:00 -1",
    "cl.reserve K 1 2 3 MAXWAIT -1 -1",
    "cl.reserve K abc 2 3 2",
    "cl.refund K 1 2 3 -1 MS MS",
    "cc.acquire K 2 -1 ID a ID b",
    "cl.throttle K 1 1 5.0",
    "sw.allow K 5 10 -1 APROX APROX",
    "cl.throttleall 2 K K2 GCRA 1 2 3 FW 5 10 MS MS",
    "cl.throttleall 1 K GCRA abc 2 3 QUANTITY -1",
    "cl.throttleall 2 K K GCRA 1 2 3 GCRA 1 2 3 MS MS",
];

/// Calls on keys of other types and on strings that are no state.
const TYPED: &[&str] = &[
    "cl.throttle L 1 2 3",
    "cl.peek L 1 2 3",
    "cl.reserve L 1 2 3 MAXWAIT 1",
    "cl.refund L 1 2 3 1",
    "cl.throttleall 1 L GCRA 1 2 3",
    "cl.throttleall 1 L FW 5 10",
    "cl.throttleall 1 L SW 5 10",
    // The flat path's form, the typed key first and second.
    "cl.throttleall 2 L K2 GCRA 1000 1 2 FW 100 86400 ALIGN",
    "cl.throttleall 2 K2 L GCRA 1000 1 2 FW 100 86400 ALIGN",
    "cl.throttleall 2 L K2 GCRA 1000 1 2 FW 100 60",
    "cl.throttleall 2 K2 L GCRA 1000 1 2 FW 100 60",
    "sw.allow L 5 10",
    "sw.allow L 5 10 APPROX",
    "sw.peek L 5 10",
    "sw.refund L 5 10 1",
    "fw.incr L 5 10",
    "fw.peek L 5 10",
    "fw.refund L 5 10 1",
    "cc.acquire L 2 10",
    "cc.release L a",
    "cc.renew L a 10",
    "cc.peek L 2",
];

/// Words of a line, with `K` replaced by `key`.
fn case_words(line: &str, key: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| match w {
            "K" | "L" => key.as_bytes().to_vec(),
            "K2" => format!("{key}:2").into_bytes(),
            w => w.as_bytes().to_vec(),
        })
        .collect()
}

/// Calls with a word that cannot be written in a line (empty, binary,
/// long), which stands in it for `_`.
const ODD_CASES: &[(&str, &[u8])] = &[
    (
        "cl.throttle K 1 2 3 _",
        b"APROXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
    ),
    ("sw.allow K 5 10 _", b"\x01\xffAPPROX\n"),
    ("fw.incr K 5 10 _", b""),
    ("cl.throttle K _ 2 3", b""),
    ("cl.throttle K 1 2 _", b""),
    ("cc.acquire K 2 10 ID _", &[b'i'; 1025]),
    ("cc.acquire K 2 10 ID _", &[b'i'; 1024]),
    ("cc.acquire K 2 10 ID _", b""),
    ("cc.release K _", b""),
];

#[test]
fn every_error_and_form_of_the_grammar_agrees() {
    let s = Server::start();
    let c = &mut s.conn();
    for line in OTHER_TYPES {
        cmd(c, line).unwrap();
        let mut w = twin::words(line);
        w[1] = twin_key(&w[1]);
        module_call(c, &w).unwrap();
    }
    // Module states the twin must refuse, and the twin's own.
    cmd(c, "SW.ALLOW module:sw 5 10").unwrap();
    cmd(c, "CC.ACQUIRE module:cc 5 10 ID a").unwrap();
    let mut pair = Pair::new(c, 0);
    let mut calls: Vec<Vec<Vec<u8>>> = Vec::new();
    for (i, line) in CASES.iter().enumerate() {
        calls.push(case_words(line, &format!("case:{i}")));
    }
    for (i, (line, odd)) in ODD_CASES.iter().enumerate() {
        let mut words = case_words(line, &format!("odd:{i}"));
        for w in words.iter_mut().filter(|w| w.as_slice() == b"_") {
            *w = odd.to_vec();
        }
        calls.push(words);
    }
    for key in [
        "other:list",
        "other:hash",
        "other:text",
        "other:number",
        "other:negative",
    ] {
        for line in TYPED {
            calls.push(case_words(line, key));
        }
    }
    let mut failures = Vec::new();
    let mut twin_only = Vec::new();
    for words in &calls {
        let before = pair.twin_only;
        match pair.compare(c, words) {
            Err(difference) => failures.push(format!(
                "{}\n    {}",
                show(words),
                difference.replace('\n', "\n    ")
            )),
            Ok(_) if pair.twin_only > before => twin_only.push(show(words)),
            Ok(_) => {}
        }
    }
    // The module's own types on the twin, and the twin's on the module.
    let mut cross = Vec::new();
    for line in [
        "sw.allow module:sw 5 10",
        "sw.peek module:sw 5 10",
        "cc.acquire module:cc 5 10",
        "cc.peek module:cc 5",
        "cl.throttle module:sw 1 2 3",
        "fw.incr module:cc 5 10",
    ] {
        let w = twin::words(line);
        match pair.twin.call(c, &w) {
            Err(e) if e.starts_with("WRONGTYPE") => {}
            other => cross.push(format!("twin {line}: {other:?}")),
        }
    }
    // And the twin's own structures on the module.
    for (create, line) in [
        ("sw.allow twin:own:swe 5 10", "sw.allow twin:own:swe 5 10"),
        (
            "sw.allow twin:own:swa 5 10 APPROX",
            "sw.allow twin:own:swa 5 10 APPROX",
        ),
        ("cc.acquire twin:own:cc 5 10", "cc.acquire twin:own:cc 5 10"),
        ("cc.acquire twin:own:cc 5 10", "cc.peek twin:own:cc 5"),
    ] {
        pair.twin.call(c, &twin::words(create)).unwrap();
        match module_call(c, &twin::words(line)) {
            Err(e) if e.starts_with("WRONGTYPE") || e.starts_with("ERR key holds a string") => {}
            other => cross.push(format!("module {line}: {other:?}")),
        }
    }
    eprintln!("twin-only errors for: {twin_only:#?}");
    assert!(
        failures.is_empty() && cross.is_empty(),
        "{} of {} calls differ:\n  {}\n{}",
        failures.len(),
        calls.len(),
        failures.join("\n  "),
        cross.join("\n")
    );
}
